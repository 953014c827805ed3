"""A deployment's life as its owner asks for it (#33): make one, give it a new version, change its
settings, stop, start, delete; and what its page and the API show of it.

These functions block (the database) and only change records: the controller (controller.py) sees the
change at its next round and starts or stops the replicas. Every refusal is the user's 4xx with a sentence
and changes nothing.
"""

from __future__ import annotations

from sqlalchemy import func, select

from workspace import i18n
from workspace.caller import Caller
from workspace.db import Database, iso, utcnow
from workspace.errors import UserError
from workspace.executions import Execution, find_workspace, get_or_create_workspace

from . import specs
from .policy import DeploymentPolicy
from .records import ENDING, LIVE, Deployment, DeploymentVersion, find, workspace_name


def no_such(name: str) -> UserError:
    return UserError(404, "You have no deployment “{name}”.", name=name)


def owned(session, owner: str, name: str) -> Deployment:
    dep = find(session, owner, name)
    if dep is None or dep.deleted is not None:
        raise no_such(name)
    return dep


def create(db: Database, caller: Caller, body: dict, images: dict[str, str], policy: DeploymentPolicy) -> dict:
    """A new deployment and its version 1, which the controller then starts (blocking)."""
    specs.check_fields(body, specs.FIELDS_NEW)
    name = specs.parse_name(body.get("name"))
    output, dataset = specs.source_of(body)
    image = specs.parse_image(body.get("image"), images)
    command = specs.parse_command(body.get("command"))
    port = specs.parse_port(body.get("port", 8080))
    replicas = specs.parse_replicas(body.get("replicas", 1), policy.max_replicas)
    ready = specs.parse_ready(body.get("ready"))
    access, course = specs.parse_access(body.get("access"), body.get("course"), caller)
    idle = specs.parse_idle(body.get("idle_seconds"))
    rtype = body.get("resource_type")
    if rtype is not None and not isinstance(rtype, str):
        raise UserError(400, "“resource_type” must be the name of a resource type.")
    with db.session() as s:
        existing = find(s, caller.name, name)
        if existing is not None:
            if existing.deleted is not None:
                raise UserError(409, "“{name}” is being deleted; try again in a moment.", name=name)
            raise UserError(409, "You already have a deployment “{name}”.", name=name)
        have = s.scalar(
            select(func.count())
            .select_from(Deployment)
            .where(Deployment.owner == caller.name, Deployment.deleted.is_(None))
        )
        if not caller.admin and have >= policy.max_deployments_per_user:
            raise UserError(
                403,
                "You have {count} deployments, the most one person may have; delete one first.",
                count=have,
            )
        source = specs.resolve_source(s, caller.name, caller, output, dataset)
        dep = Deployment(
            owner=caller.name,
            name=name,
            access=access,
            course=course,
            replicas=replicas,
            resource_type=rtype,
            idle_seconds=idle,
            rolling=1,
            rolling_since=utcnow(),
        )
        dep.versions.append(_version(1, source, image, command, port, ready))
        s.add(dep)
        s.flush()
        get_or_create_workspace(s, caller.name, workspace_name(dep.key))  # its replicas' executions
        return dep.as_dict()


def _version(number: int, source: specs.Source, image: str, command: str, port: int, ready: str) -> DeploymentVersion:
    return DeploymentVersion(
        number=number,
        source=source.label,
        source_kind=source.kind,
        source_key=source.key,
        execution_id=source.execution_id,
        dataset_version_id=source.dataset_version_id,
        image=image,
        command=command,
        port=port,
        ready_path=ready,
    )


def add_version(db: Database, caller: Caller, owner: str, name: str, body: dict, images: dict[str, str]) -> dict:
    """A new version, rolled out by the controller without downtime: what the body does not name is kept
    from the newest version. A rollout under way is given up for it (blocking)."""
    specs.check_fields(body, specs.FIELDS_VERSION)
    with db.session() as s:
        dep = owned(s, owner, name)
        base = dep.versions[-1]
        output, dataset = specs.source_of(body, current=base.source)
        if output is None and dataset is None:
            source = specs.Source(
                base.source, base.source_kind, base.source_key, base.execution_id, base.dataset_version_id
            )
        else:
            source = specs.resolve_source(s, owner, caller, output, dataset)
        image = specs.parse_image(body["image"], images) if "image" in body else base.image
        command = specs.parse_command(body["command"]) if "command" in body else base.command
        port = specs.parse_port(body["port"]) if "port" in body else base.port
        ready = specs.parse_ready(body["ready"]) if "ready" in body else base.ready_path
        number = base.number + 1
        superseded = dep.version(dep.rolling)
        if superseded is not None:
            superseded.state = "retired"
            superseded.failure = i18n.kept("Replaced by version {version} before it served.", version=number)
        dep.versions.append(_version(number, source, image, command, port, ready))
        dep.rolling, dep.rolling_since, dep.message = number, utcnow(), None
        dep.running, dep.asleep = True, False
        s.flush()
        return dep.version(number).as_dict()


def change(db: Database, caller: Caller, owner: str, name: str, body: dict, policy: DeploymentPolicy) -> dict:
    """Its replicas, access or scale to zero, changed (blocking)."""
    specs.check_fields(body, specs.FIELDS_SETTINGS)
    if not body:
        raise UserError(400, "Say what to change: {fields}.", fields=", ".join(sorted(specs.FIELDS_SETTINGS)))
    with db.session() as s:
        dep = owned(s, owner, name)
        if "replicas" in body:
            dep.replicas = specs.parse_replicas(body["replicas"], policy.max_replicas)
        if "access" in body or "course" in body:
            dep.access, dep.course = specs.parse_access(
                body.get("access", dep.access), body.get("course", dep.course if "access" not in body else None), caller
            )
        if "idle_seconds" in body:
            dep.idle_seconds = specs.parse_idle(body["idle_seconds"])
        return dep.as_dict()


def set_running(db: Database, owner: str, name: str, running: bool) -> dict:
    """Stop (its replicas stop; its address answers that it is stopped) or start it again (blocking)."""
    with db.session() as s:
        dep = owned(s, owner, name)
        dep.running, dep.asleep, dep.message = running, False, None
        if running and dep.serving is None and dep.rolling is None and dep.versions:
            # never served (its first version failed): start its newest version again
            newest = dep.versions[-1]
            newest.state, newest.failure = "new", None
            dep.rolling, dep.rolling_since = newest.number, utcnow()
        return dep.as_dict()


def delete(db: Database, owner: str, name: str) -> None:
    """Delete it: its address stops answering at once, the controller stops its replicas and then removes
    its records (its keys go with it). Its source output is the owner's as before (blocking)."""
    with db.session() as s:
        dep = owned(s, owner, name)
        dep.deleted, dep.running = utcnow(), False


def list_of(db: Database, owner: str, locale: str = i18n.DEFAULT) -> list[dict]:
    with db.session() as s:
        deps = s.scalars(
            select(Deployment).where(Deployment.owner == owner, Deployment.deleted.is_(None)).order_by(Deployment.name)
        )
        return [d.as_dict(locale) for d in deps]


def describe(db: Database, owner: str, name: str, locale: str = i18n.DEFAULT) -> dict:
    """Its settings, versions, replicas (with their executions: restarts, node, log) and keys; the
    controller's sentences in `locale`."""
    with db.session() as s:
        dep = owned(s, owner, name)
        out = dep.as_dict(locale)
        out["versions"] = [{**v.as_dict(), "failure": i18n.said(locale, v.failure)} for v in dep.versions]
        out["keys"] = [k.as_dict() for k in dep.keys]
        out["workspace"] = dep.workspace
        numbers = _execution_numbers(s, owner, dep)
        out["replica_list"] = [
            {
                "server": r.server,
                "version": r.version,
                "state": r.state,
                "node": r.node,
                "restarts": r.restarts,
                "execution": numbers.get(r.server),
                "ready_at": iso(r.ready_at),
                "created": iso(r.created),
                "message": i18n.said(locale, r.message),
            }
            for r in dep.replica_records
            if r.state in (*LIVE, *ENDING)
        ]
        return out


def _execution_numbers(session, owner: str, dep: Deployment) -> dict[str, int]:
    """{replica server: the number of its newest execution} (its log is that execution's)."""
    ws = find_workspace(session, owner, dep.workspace)
    if ws is None:
        return {}
    rows = session.execute(
        select(Execution.server, func.max(Execution.number))
        .where(Execution.workspace_id == ws.id)
        .group_by(Execution.server)
    )
    return {server: number for server, number in rows if server}


def serving_output(session, execution_id: int) -> list[str]:
    """The names of the deployments whose versions in use (serving, or being rolled out) mount the output of
    execution `execution_id`: it cannot be deleted while they do."""
    return _serving(session, DeploymentVersion.execution_id == execution_id)


def serving_dataset_version(session, version_id: int) -> list[str]:
    """As `serving_output`, for a dataset version."""
    return _serving(session, DeploymentVersion.dataset_version_id == version_id)


def _serving(session, source) -> list[str]:
    rows = session.execute(
        select(Deployment.name, Deployment.serving, Deployment.rolling, DeploymentVersion.number)
        .join(DeploymentVersion, DeploymentVersion.deployment_id == Deployment.id)
        .where(source, Deployment.deleted.is_(None))
    )
    return sorted({name for name, serving, rolling, number in rows if number in (serving, rolling)})
