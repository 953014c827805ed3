"""Dataset versions: made from an execution's output, a host path (administrators) or an upload, numbered
1, 2, … per dataset, deleted unless a running workspace mounts them.

A version is built in the home store under a fresh key (`store.dataset_from_*`), checked against the
dataset rules (`DatasetRules.check_tree`) while it is built, and only then recorded; a version that fails
leaves no record. Its files count against its dataset owner's quota from then on.

Here, not in workspace/datasets.py: making one measures the owner's storage (workspace/limits/quotas.py), and
quotas.py reads the datasets' tables.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from workspace.caller import Caller
from workspace.datasets import Dataset, DatasetRules, DatasetVersion, find_dataset, writable
from workspace.datasets import create as datasets_create
from workspace.db import Database, utcnow
from workspace.deployments import deployment
from workspace.errors import UserError
from workspace.executions import ACTIVE, Execution, execution_by_number, find_workspace
from workspace.labelling import projects as labelling
from workspace.limits import quotas
from workspace.store.homes import HomeStoreError, PathEscapeError, StoreFullError

# build(key, check): fill the store's dataset `key`, calling check(path) on the finished tree
Build = Callable[[str, Callable], None]


def next_number(ds: Dataset) -> int:
    """The number of the dataset's next version: one more than any it ever had (a deleted number is not
    reused, so that `owner/name:3` never names two different things)."""
    return max((v.number for v in ds.versions), default=0) + 1


def make(
    db: Database, store, rules: DatasetRules, dataset_id: int, build: Build, origin: str, label: str, user: str
) -> dict:
    """Build a version with `build(key, check)` and record it as the dataset's next one (blocking); the
    user's 400 or 507 as a sentence naming `label` when the source cannot become one."""
    key = f"d{uuid.uuid4().hex}"
    measured = {}

    def check(path):
        measured["size"], measured["files"] = rules.check_tree(path, label)

    try:
        build(key, check)
    except FileNotFoundError:
        raise UserError(400, "{label} does not exist.", label=label)
    except StoreFullError:
        raise UserError(507, "The storage is full; the version was not made. Tell your administrator.")
    except PathEscapeError as e:
        raise UserError(
            400,
            "{label} cannot become a dataset ({path!r} leads through a link or out of the output; give the path "
            "of a real directory inside it).",
            label=label,
            path=e.path,
        )
    except HomeStoreError as e:
        raise UserError(400, "{label} cannot become a dataset ({error}).", label=label, error=str(e))
    with db.session() as s:
        ds = s.get(Dataset, dataset_id)
        version = DatasetVersion(
            dataset=ds,
            number=next_number(ds),
            key=key,
            bytes=measured["size"],
            files=measured["files"],
            creator=user,
            origin=origin,
            origin_detail=label,
        )
        s.add(version)
        s.flush()
        return version.as_dict()


def source(session: Session, store, data: dict, caller: Caller) -> tuple[str, str, Build]:
    """(origin, label, build) for where a new version comes from: `{"from_execution": {"workspace",
    "number", "path"}}` (one of the user's outputs, or a folder of it) or `{"from_path": "/host/dir"}`
    (administrators); the user's 400, 403 or 404 otherwise."""
    if "from_execution" in data:
        src = data["from_execution"]
        if not isinstance(src, dict) or not isinstance(src.get("workspace"), str):
            raise UserError(400, 'from_execution needs {"workspace": NAME, "number": N, "path": DIR}.')
        try:
            number = int(src.get("number"))
        except (TypeError, ValueError):
            raise UserError(400, "from_execution.number must be an execution number like 3.")
        path = src.get("path") or ""
        ws = find_workspace(session, caller.name, src["workspace"])
        ex: Execution | None = execution_by_number(session, ws, number) if ws else None
        if ex is None:
            raise UserError(
                404, "You have no execution {workspace}#{number}.", workspace=src["workspace"], number=number
            )
        if not ex.has_output:
            raise UserError(
                400, "Execution {workspace}#{number} has no saved output.", workspace=src["workspace"], number=number
            )
        label = f"{src['workspace']}#{number}" + (f":{path}" if path else "")
        snapshot = ex.snapshot.key
        if not store.has_snapshot(snapshot):  # saved on a swarm's node, not yet in the store of record
            raise UserError(
                409,
                "The output of {workspace}#{number} is still being copied from {node} to the "
                "central store; please try again in a minute.",
                workspace=src["workspace"],
                number=number,
                node=ex.snapshot.node,
            )
        return "execution", label, lambda key, check: store.dataset_from_snapshot(snapshot, path, key, check)
    if "from_path" in data:
        if not caller.admin:
            raise UserError(403, "Only administrators can import a dataset from a path on the server.")
        path = data["from_path"]
        if not isinstance(path, str) or not path.startswith("/"):
            raise UserError(400, "from_path must be an absolute path on the server.")
        return "host", path, lambda key, check: store.dataset_from_path(path, key, check)
    raise UserError(400, "Say where the version comes from: from_execution or from_path.")


def add(
    db: Database,
    store,
    rules: DatasetRules,
    owner: str,
    name: str,
    data: dict,
    caller: Caller,
) -> dict:
    """A new version of owner/name from where `data` says (see `source`), made by its owner or an
    administrator (blocking)."""
    with db.session() as s:
        ds = writable(s, owner, name, caller)
        origin, label, build = source(s, store, data, caller)
        dataset_id = ds.id
    version = make(db, store, rules, dataset_id, build, origin, label, caller.name)
    # its files count from now on (those it shares with the output once): over the quota,
    # the next start is refused, as after a save
    quotas.measure(db, store, owner)
    return version


def add_files(
    db: Database,
    store,
    rules: DatasetRules,
    dataset: tuple[str, str],
    files: dict[str, bytes],
    origin: str,
    label: str,
    caller: Caller,
) -> dict:
    """A new version of dataset (owner, name) holding `files` ({name: bytes}) that the platform made, like
    a labelling project's export (blocking); the dataset is made first if the caller has none of that name."""
    owner, name = dataset
    with db.session() as s:
        missing = find_dataset(s, owner, name) is None
    if missing and owner == caller.name:
        datasets_create(db, owner, name, "", "private")
    with db.session() as s:
        dataset_id = writable(s, owner, name, caller).id

    def fill(path):
        # readable by the workspaces' user that mounts it, whatever this process's umask (as an upload's)
        os.chmod(path, 0o755)
        for file, data in files.items():
            fd = os.open(path / file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.chmod(path / file, 0o644)

    build = lambda key, check: store.dataset_from_files(key, fill, check)  # noqa: E731
    version = make(db, store, rules, dataset_id, build, origin, label, caller.name)
    quotas.measure(db, store, owner)
    return version


def mounted_by(session: Session, version: DatasetVersion) -> Execution | None:
    """An execution that mounts the version now (one that has not stopped running), or None."""
    for ex in session.scalars(select(Execution).where(Execution.state.in_(ACTIVE))):
        if any(m.get("version_id") == version.id for m in ex.datasets or []):
            return ex
    return None


def delete(db: Database, store, owner: str, name: str, number: int, caller: Caller) -> None:
    """Delete version `number` of owner/name; refused (409) while a running workspace mounts it, whose
    /inputN would vanish under it (blocking). The record is marked first, then the files go."""
    with db.session() as s:
        ds = writable(s, owner, name, caller)
        version = next((v for v in ds.live_versions() if v.number == number), None)
        if version is None:
            raise UserError(404, "The dataset {dataset} has no version {number}.", dataset=ds.ref, number=number)
        ex = mounted_by(s, version)
        if ex is not None:
            raise UserError(
                409,
                "Version {number} of {dataset} is mounted by a running workspace ({owner}/{workspace}); stop it first.",
                number=number,
                dataset=ds.ref,
                owner=ex.workspace.owner,
                workspace=ex.workspace.name,
            )
        served = deployment.serving_dataset_version(s, version.id)
        if served:
            raise UserError(
                409,
                "Version {number} of {dataset} is served by the deployment {deployments}; give it a new version "
                "or delete it first.",
                number=number,
                dataset=ds.ref,
                deployments=", ".join(served),
            )
        labelled = labelling.labelling_dataset_version(s, version.id)
        if labelled:
            raise UserError(
                409,
                "Version {number} of {dataset} is labelled in the labelling project {projects}; it stays while "
                "the project does.",
                number=number,
                dataset=ds.ref,
                projects=", ".join(labelled),
            )
        version.deleted = utcnow()
        key = version.key
    store.delete_dataset(key)
