"""REST API for datasets, under /services/workspace/api/datasets.

    GET    /api/datasets                                  {"mine", "shared", "public"}
    POST   /api/datasets                                  {"name", "description", "visibility"}
    GET    /api/datasets/{owner}/{name}
    POST   /api/datasets/{owner}/{name}/versions          {"from_execution": {"workspace", "number", "path"}}
                                                          or {"from_path": "/host/dir"} (admins)
    DELETE /api/datasets/{owner}/{name}/versions/{n}      refused while a running execution mounts it
    POST   /api/datasets/{owner}/{name}/shares            {"user": NAME} or {"group": NAME}
    DELETE /api/datasets/{owner}/{name}/shares/{user|group}/{NAME}

Owners change their datasets (admins any); readers see them.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select

from .. import quotas
from ..datasets import VISIBILITIES, Dataset, DatasetShare, DatasetVersion, check_slug, find_dataset, listing
from ..db import utcnow
from ..errors import UserError
from ..executions import ACTIVE, Execution, execution_by_number, find_workspace
from ..homes import HomeStoreError, StoreFullError
from .api import APIHandler


class DatasetHandler(APIHandler):
    @property
    def store(self):
        return self.settings["workspace_store"]

    @property
    def rules(self):
        return self.settings["dataset_rules"]

    def readable(self, s, owner: str, name: str) -> Dataset:
        user, groups, admin = self.who()
        ds = find_dataset(s, owner, name)
        if ds is None or not ds.readable_by(user, groups, admin):
            raise UserError(404, f"There is no dataset {owner}/{name} that you can see.")
        return ds

    def writable(self, s, owner: str, name: str) -> Dataset:
        ds = self.readable(s, owner, name)
        user, _, admin = self.who()
        if ds.owner != user and not admin:
            raise UserError(403, f"Only {ds.owner} can change the dataset {ds.ref}.")
        return ds

    def make_version(self, dataset_id: int, make, origin: str, label: str, user: str) -> dict:
        """Build a version with `make(key, check)` and record it (blocking); errors are sentences."""
        key = f"d{uuid.uuid4().hex}"
        measured = {}

        def check(path):
            measured["size"], measured["files"] = self.rules.check_tree(path, label)

        try:
            make(key, check)
        except FileNotFoundError:
            raise UserError(400, f"{label} does not exist.")
        except StoreFullError:
            raise UserError(507, "The storage is full; the version was not made. Tell your administrator.")
        except HomeStoreError as e:
            raise UserError(400, f"{label} cannot become a dataset ({e}).")
        with self.db.session() as s:
            ds = s.get(Dataset, dataset_id)
            number = max((v.number for v in ds.versions), default=0) + 1
            version = DatasetVersion(
                dataset=ds,
                number=number,
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


class DatasetsHandler(DatasetHandler):
    async def get(self):
        user, groups, admin = self.who()

        def load():
            with self.db.session() as s:
                return listing(s, user, groups)

        self.write_json(await self.blocking(load))

    async def post(self):
        user, _, _ = self.who()
        data = self.body()
        name = check_slug(data.get("name"))
        visibility = data.get("visibility", "private")
        if visibility not in VISIBILITIES:
            raise UserError(400, f"Visibility must be one of {', '.join(VISIBILITIES)}, not {visibility!r}.")
        description = data.get("description") or ""
        if not isinstance(description, str):
            raise UserError(400, "The description must be text.")

        def create():
            with self.db.session() as s:
                if find_dataset(s, user, name) is not None:
                    raise UserError(409, f"You already have a dataset named {name}.")
                ds = Dataset(owner=user, name=name, description=description, visibility=visibility)
                s.add(ds)
                s.flush()
                return ds.as_dict()

        self.write_json(await self.blocking(create), status=201)


class OneDatasetHandler(DatasetHandler):
    async def get(self, owner, name):
        def load():
            with self.db.session() as s:
                return self.readable(s, owner, name).as_dict()

        self.write_json(await self.blocking(load))


class VersionsHandler(DatasetHandler):
    async def post(self, owner, name):
        user, _, admin = self.who()
        data = self.body()

        def build():
            with self.db.session() as s:
                ds = self.writable(s, owner, name)
                origin, label, make = self._source(s, data, user, admin)
                dataset_id = ds.id
            version = self.make_version(dataset_id, make, origin, label, user)
            # its files count from now on (those it shares with the output once): over the quota,
            # the next start is refused, as after a save
            quotas.measure(self.db, self.store, owner)
            return version

        self.write_json(await self.blocking(build), status=201)

    def _source(self, s, data: dict, user: str, admin: bool):
        """(origin, label, make(key, check)) for where the version comes from."""
        if "from_execution" in data:
            src = data["from_execution"]
            if not isinstance(src, dict) or not isinstance(src.get("workspace"), str):
                raise UserError(400, 'from_execution needs {"workspace": NAME, "number": N, "path": DIR}.')
            try:
                number = int(src.get("number"))
            except (TypeError, ValueError):
                raise UserError(400, "from_execution.number must be an execution number like 3.")
            path = src.get("path") or ""
            ws = find_workspace(s, user, src["workspace"])
            ex: Execution | None = execution_by_number(s, ws, number) if ws else None
            if ex is None:
                raise UserError(404, f"You have no execution {src['workspace']}#{number}.")
            if not ex.has_output:
                raise UserError(400, f"Execution {src['workspace']}#{number} has no saved output.")
            label = f"{src['workspace']}#{number}" + (f":{path}" if path else "")
            snapshot = ex.snapshot.key
            return "execution", label, lambda key, check: self.store.dataset_from_snapshot(snapshot, path, key, check)
        if "from_path" in data:
            if not admin:
                raise UserError(403, "Only administrators can import a dataset from a path on the server.")
            path = data["from_path"]
            if not isinstance(path, str) or not path.startswith("/"):
                raise UserError(400, "from_path must be an absolute path on the server.")
            return "host", path, lambda key, check: self.store.dataset_from_path(path, key, check)
        raise UserError(400, "Say where the version comes from: from_execution or from_path.")


class VersionHandler(DatasetHandler):
    async def delete(self, owner, name, number):
        def delete():
            with self.db.session() as s:
                ds = self.writable(s, owner, name)
                version = next((v for v in ds.live_versions() if v.number == int(number)), None)
                if version is None:
                    raise UserError(404, f"The dataset {ds.ref} has no version {number}.")
                for ex in s.scalars(select(Execution).where(Execution.state.in_(ACTIVE))):
                    if any(m.get("version_id") == version.id for m in ex.datasets or []):
                        raise UserError(
                            409,
                            f"Version {number} of {ds.ref} is mounted by a running workspace "
                            f"({ex.workspace.owner}/{ex.workspace.name}); stop it first.",
                        )
                version.deleted = utcnow()
                key = version.key
            self.store.delete_dataset(key)

        await self.blocking(delete)
        self.set_status(204)
        self.finish()


class SharesHandler(DatasetHandler):
    async def post(self, owner, name):
        data = self.body()
        kinds = [k for k in ("user", "group") if k in data]
        if len(kinds) != 1 or not isinstance(data[kinds[0]], str) or not data[kinds[0]]:
            raise UserError(400, 'Share with one user or one group: {"user": NAME} or {"group": NAME}.')
        kind, principal = kinds[0], data[kinds[0]]

        def share():
            with self.db.session() as s:
                ds = self.writable(s, owner, name)
                if not any(x.kind == kind and x.principal == principal for x in ds.shares):
                    ds.shares.append(DatasetShare(kind=kind, principal=principal))
                if ds.visibility == "private":
                    ds.visibility = "shared"
                s.flush()
                return ds.as_dict()

        self.write_json(await self.blocking(share), status=201)


class ShareHandler(DatasetHandler):
    async def delete(self, owner, name, kind, principal):
        def unshare():
            with self.db.session() as s:
                ds = self.writable(s, owner, name)
                kept = [x for x in ds.shares if not (x.kind == kind and x.principal == principal)]
                if len(kept) == len(ds.shares):
                    raise UserError(404, f"{ds.ref} is not shared with the {kind} “{principal}”.")
                ds.shares = kept

        await self.blocking(unshare)
        self.set_status(204)
        self.finish()


def handlers(prefix: str) -> list:
    ds = rf"{prefix}api/datasets/([^/]+)/([^/]+)"
    return [
        (rf"{prefix}api/datasets/?", DatasetsHandler),
        (rf"{ds}/?", OneDatasetHandler),
        (rf"{ds}/versions/?", VersionsHandler),
        (rf"{ds}/versions/(\d+)/?", VersionHandler),
        (rf"{ds}/shares/?", SharesHandler),
        (rf"{ds}/shares/(user|group)/([^/]+)/?", ShareHandler),
    ]
