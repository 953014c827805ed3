"""A replica's start as the spawner sees it (#33): what it runs, checked against the records, and where
its app answers once it runs.

A replica's server is started by the controller with `{"serve": {"deployment": KEY}}` as its options. Its
owner could send the same options from their own token: that starts only a replica the controller has
recorded for one of their deployments (the server's name is the record's), with that deployment's
version, never anything the options say.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from workspace.db import Database
from workspace.errors import UserError
from workspace.executions import ACTIVE, Execution, find_workspace

from .records import SERVE_SERVER, by_key, replica_by_server, workspace_name

OUTPUT_MOUNT = "/openbayes/output"  # where a replica finds what it serves, read-only


@dataclass(frozen=True)
class ReplicaSpec:
    """What a replica's start runs: its version's command, port and image, and what it mounts."""

    deployment: str  # the deployment's name
    key: str  # the deployment's key
    version: int
    command: str
    port: int
    image: str
    resource_type: str | None
    mount: dict  # {"mount", "key", "source", "ref"}: the output or dataset version, read-only


def parse_serve(value) -> str:
    """`user_options["serve"]`: {"deployment": KEY}; the user's 400 otherwise."""
    if not isinstance(value, dict) or set(value) != {"deployment"} or not isinstance(value["deployment"], str):
        raise UserError(400, "“serve” is the platform's own option for a deployment's replica; do not set it.")
    return value["deployment"]


def workspace_of(server: str, options) -> str | None:
    """The hidden workspace of a replica's server (None: not a replica's server); the user's 400 for a
    replica's server without its option, or the option on another server."""
    serve = (options or {}).get("serve")
    if not SERVE_SERVER.fullmatch(server or ""):
        if serve is not None:
            raise UserError(400, "“serve” is the platform's own option for a deployment's replica; do not set it.")
        return None
    return workspace_name(parse_serve(serve))


def spec_of(db: Database, owner: str, server: str, options) -> ReplicaSpec:
    """The replica `server` of `owner` runs, from the records; the user's 404/409 for a server no deployment
    of theirs has asked for (blocking)."""
    key = parse_serve((options or {}).get("serve"))
    with db.session() as s:
        dep = by_key(s, key)
        replica = replica_by_server(s, server)
        if dep is None or dep.owner != owner or replica is None or replica.deployment_id != dep.id:
            raise UserError(404, "No deployment of yours asked for the replica “{server}”.", server=server)
        if dep.deleted is not None or replica.state != "starting":
            raise UserError(409, "The replica “{server}” is not wanted any more.", server=server)
        version = dep.version(replica.version)
        return ReplicaSpec(
            deployment=dep.name,
            key=dep.key,
            version=version.number,
            command=version.command,
            port=version.port,
            image=version.image,
            resource_type=dep.resource_type,
            mount={
                "mount": OUTPUT_MOUNT,
                "key": version.source_key,
                "source": version.source_kind,
                "ref": version.source,
                "version_id": version.dataset_version_id,
            },
        )


def running(db: Database, server: str, address: str, node: str | None) -> None:
    """Where the replica's app answers (the spawner's record of its container), once it runs (blocking)."""
    with db.session() as s:
        replica = replica_by_server(s, server)
        if replica is not None:
            replica.address, replica.node = address, node or None


def spread_over(db: Database, owner: str, workspace: str, server: str, nodes: list[str]) -> list[str]:
    """Of `nodes`, those where no other replica of the same deployment runs or starts, for a replica's
    placement to prefer: a deployment's replicas on as many nodes as it has, so that a lost node leaves the
    others serving (blocking)."""
    with db.session() as s:
        ws = find_workspace(s, owner, workspace)
        if ws is None:
            return list(nodes)
        taken = set(
            s.scalars(
                select(Execution.node).where(
                    Execution.workspace_id == ws.id,
                    Execution.server != server,
                    Execution.state.in_(ACTIVE),
                    Execution.node.is_not(None),
                )
            )
        )
    return [n for n in nodes if n not in taken]
