"""Datasets: versioned, shared, mounted read-only at /input0 … /input4.

A dataset (owner/name) has immutable, numbered versions and is readable by
its owner, by the users and JupyterHub groups it is shared with, and by
everyone when public. A version is made from an execution's output (sharing
the home store's data, no copy), from a host path (admins), or by
resumable upload (workspace/uploads/staging.py). At spawn, `user_options["datasets"]`
lists up to five references, `owner/name` (latest version) or `owner/name:3`; the versions
resolved then are mounted in list order and recorded on the execution.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
from dataclasses import dataclass

from sqlalchemy import BigInteger, DateTime, ForeignKey, Integer, String, Text, UniqueConstraint, select
from sqlalchemy.orm import Mapped, Session, mapped_column, relationship
from traitlets import Bool
from traitlets import Integer as IntTrait
from traitlets.config import LoggingConfigurable

from workspace import i18n
from workspace.caller import Caller
from workspace.db import Base, Database, iso, utcnow
from workspace.errors import UserError
from workspace.store import paths

MAX_BOUND = 5
MOUNT_PREFIX = "/input"
VISIBILITIES = ("private", "shared", "public")
SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?$")
REF = re.compile(r"^(?P<owner>[^/:\s]+)/(?P<name>[^/:\s]+)(?::(?P<version>\d+))?$")


class Dataset(Base):
    __tablename__ = "datasets"
    __table_args__ = (UniqueConstraint("owner", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    visibility: Mapped[str] = mapped_column(String(16), default="private")
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)

    versions: Mapped[list["DatasetVersion"]] = relationship(back_populates="dataset", order_by="DatasetVersion.number")
    shares: Mapped[list["DatasetShare"]] = relationship(back_populates="dataset", cascade="all, delete-orphan")

    @property
    def ref(self) -> str:
        return f"{self.owner}/{self.name}"

    def live_versions(self) -> list["DatasetVersion"]:
        return [v for v in self.versions if v.deleted is None]

    def readable_by(self, caller: Caller) -> bool:
        if caller.admin or caller.name == self.owner or self.visibility == "public":
            return True
        return any(
            (s.kind == "user" and s.principal == caller.name) or (s.kind == "group" and s.principal in caller.groups)
            for s in self.shares
        )

    def as_dict(self) -> dict:
        return {
            "owner": self.owner,
            "name": self.name,
            "ref": self.ref,
            "description": self.description,
            "visibility": self.visibility,
            "created": iso(self.created),
            "versions": [v.as_dict() for v in self.live_versions()],
            "shares": [{"kind": s.kind, "principal": s.principal} for s in self.shares],
        }


class DatasetVersion(Base):
    __tablename__ = "dataset_versions"
    __table_args__ = (UniqueConstraint("dataset_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    bytes: Mapped[int] = mapped_column(BigInteger)
    files: Mapped[int] = mapped_column(Integer)
    creator: Mapped[str] = mapped_column(String(255))
    origin: Mapped[str] = mapped_column(String(16))  # upload | host | execution
    origin_detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    deleted: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)

    dataset: Mapped[Dataset] = relationship(back_populates="versions")

    def as_dict(self) -> dict:
        return {
            "version": self.number,
            "bytes": self.bytes,
            "files": self.files,
            "creator": self.creator,
            "origin": self.origin,
            "origin_detail": self.origin_detail,
            "created": iso(self.created),
        }


class DatasetShare(Base):
    __tablename__ = "dataset_shares"
    __table_args__ = (UniqueConstraint("dataset_id", "kind", "principal"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), index=True)
    kind: Mapped[str] = mapped_column(String(8))  # user | group
    principal: Mapped[str] = mapped_column(String(255))
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)

    dataset: Mapped[Dataset] = relationship(back_populates="shares")


# -- who sees and changes what ------------------------------------------------------------


def listing(db: Database, user: str, groups: set[str]) -> dict:
    """The datasets `user` may read, as {"mine", "shared" (with me), "public"} lists of dicts (blocking); read
    as a user, never as an administrator (an administrator's "shared" is what is shared with them)."""
    out = {"mine": [], "shared": [], "public": []}
    with db.session() as s:
        for ds in s.scalars(select(Dataset).order_by(Dataset.owner, Dataset.name)):
            if ds.owner == user:
                out["mine"].append(ds.as_dict())
            elif ds.readable_by(Caller(user, groups)) and ds.visibility != "public":
                out["shared"].append(ds.as_dict())
            elif ds.visibility == "public":
                out["public"].append(ds.as_dict())
    return out


def readable(session: Session, owner: str, name: str, caller: Caller) -> Dataset:
    """The dataset owner/name if `caller` may read it; a 404 otherwise (the same words whether it exists or
    not, so that names do not leak)."""
    ds = find_dataset(session, owner, name)
    if ds is None or not ds.readable_by(caller):
        raise UserError(404, "There is no dataset {owner}/{name} that you can see.", owner=owner, name=name)
    return ds


def writable(session: Session, owner: str, name: str, caller: Caller) -> Dataset:
    """The dataset owner/name if `caller` may change it (its owner, or an administrator); a 404 or 403 otherwise."""
    ds = readable(session, owner, name, caller)
    if ds.owner != caller.name and not caller.admin:
        raise UserError(403, "Only {owner} can change the dataset {dataset}.", owner=ds.owner, dataset=ds.ref)
    return ds


def describe(db: Database, owner: str, name: str, caller: Caller) -> dict:
    """One dataset with its versions and shares, for a reader (blocking)."""
    with db.session() as s:
        return readable(s, owner, name, caller).as_dict()


def create(db: Database, owner: str, name, description, visibility) -> dict:
    """A new dataset of `owner`, with no versions yet; the user's 400 or 409 (blocking)."""
    check_slug(name)
    if visibility not in VISIBILITIES:
        raise UserError(
            400,
            "Visibility must be one of {choices}, not {visibility!r}.",
            choices=", ".join(VISIBILITIES),
            visibility=visibility,
        )
    if not isinstance(description, str):
        raise UserError(400, "The description must be text.")
    with db.session() as s:
        if find_dataset(s, owner, name) is not None:
            raise UserError(409, "You already have a dataset named {name}.", name=name)
        ds = Dataset(owner=owner, name=name, description=description, visibility=visibility)
        s.add(ds)
        s.flush()
        return ds.as_dict()


def share(ds: Dataset, kind: str, principal: str) -> bool:
    """Share `ds` with a user or a JupyterHub group (once); whether the share is new.

    A private dataset becomes "shared": private means "only its owner", which a share contradicts.
    """
    new = not any(x.kind == kind and x.principal == principal for x in ds.shares)
    if new:
        ds.shares.append(DatasetShare(kind=kind, principal=principal))
    if ds.visibility == "private":
        ds.visibility = "shared"
    return new


def add_share(db: Database, owner: str, name: str, kind: str, principal: str, caller: Caller) -> dict:
    """The owner (or an administrator) shares owner/name with a user or a group; the dataset (blocking)."""
    with db.session() as s:
        ds = writable(s, owner, name, caller)
        share(ds, kind, principal)
        s.flush()
        return ds.as_dict()


def remove_share(db: Database, owner: str, name: str, kind: str, principal: str, caller: Caller) -> None:
    """The owner (or an administrator) stops sharing owner/name with a user or a group; a 404 if it was not
    (blocking). The visibility stays: a dataset shared with nobody is still no one else's to read."""
    with db.session() as s:
        ds = writable(s, owner, name, caller)
        kept = [x for x in ds.shares if not (x.kind == kind and x.principal == principal)]
        if len(kept) == len(ds.shares):
            if kind == "group":
                raise UserError(
                    404, "{dataset} is not shared with the group “{principal}”.", dataset=ds.ref, principal=principal
                )
            raise UserError(
                404, "{dataset} is not shared with the user “{principal}”.", dataset=ds.ref, principal=principal
            )
        ds.shares = kept


# -- names and references ----------------------------------------------------------


def check_slug(name: str) -> str:
    """A dataset's name, or the user's 400 saying what a name may be."""
    if not isinstance(name, str) or not SLUG.match(name):
        raise UserError(
            400,
            "A dataset name may use lower-case letters, digits, '.', '_' and '-', must start and end with a "
            "letter or digit and be at most 64 characters; {name!r} is not one.",
            name=name,
        )
    return name


@dataclass(frozen=True)
class Ref:
    owner: str
    name: str
    version: int | None

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}" + (f":{self.version}" if self.version else "")


def parse_refs(value) -> list[Ref]:
    """`user_options["datasets"]` -> references; bad input is a 400 with a sentence."""
    if value in (None, "", []):
        return []
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s]+", value) if v]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(400, "“datasets” must be a list of references like “owner/name” or “owner/name:2”.")
    if len(value) > MAX_BOUND:
        raise UserError(
            400,
            "At most {limit} datasets can be bound (at /input0 … /input4); you asked for {count}.",
            limit=MAX_BOUND,
            count=len(value),
        )
    refs = []
    for v in value:
        m = REF.match(v.strip())
        if not m:
            raise UserError(400, "“{ref}” is not a dataset reference; write “owner/name” or “owner/name:2”.", ref=v)
        ref = Ref(m["owner"], m["name"], int(m["version"]) if m["version"] else None)
        if ref.version == 0:
            raise UserError(400, "“{ref}”: dataset versions are numbered from 1.", ref=v)
        if any((r.owner, r.name) == (ref.owner, ref.name) for r in refs):
            raise UserError(400, "The dataset {owner}/{name} is listed twice.", owner=ref.owner, name=ref.name)
        refs.append(ref)
    return refs


def find_dataset(session: Session, owner: str, name: str) -> Dataset | None:
    return session.scalar(select(Dataset).where(Dataset.owner == owner, Dataset.name == name))


def resolve(session: Session, refs: list[Ref], caller: Caller) -> list[dict]:
    """The mount plan: for each ref (in order), the version to mount at /inputN.

    A dataset the user may not read is a 403 naming it (the same words whether
    it exists or not, so that names do not leak).
    """
    plan = []
    for slot, ref in enumerate(refs):
        ds = find_dataset(session, ref.owner, ref.name)
        if ds is None or not ds.readable_by(caller):
            raise UserError(
                403,
                "You cannot use the dataset {owner}/{name}: it does not exist or is not shared with "
                "you. Ask its owner to share it.",
                owner=ref.owner,
                name=ref.name,
            )
        versions = ds.live_versions()
        if ref.version is None:
            if not versions:
                raise UserError(400, "The dataset {dataset} has no versions yet.", dataset=ds.ref)
            version = versions[-1]
        else:
            version = next((v for v in versions if v.number == ref.version), None)
            if version is None and versions:
                raise UserError(
                    400,
                    "The dataset {dataset} has no version {version} (it has: {have}).",
                    dataset=ds.ref,
                    version=ref.version,
                    have=", ".join(str(v.number) for v in versions),
                )
            if version is None:
                raise UserError(
                    400,
                    "The dataset {dataset} has no version {version} (it has: none).",
                    dataset=ds.ref,
                    version=ref.version,
                )
        plan.append(
            {
                "slot": slot,
                "mount": f"{MOUNT_PREFIX}{slot}",
                "ref": f"{ds.ref}:{version.number}",
                "version_id": version.id,
                "key": version.key,
            }
        )
    return plan


# -- what a version may contain --------------------------------------------------------


class DatasetRules(LoggingConfigurable):
    """Admin-configurable rules a new version must pass."""

    small_files_rule = Bool(
        True,
        config=True,
        help="""Refuse versions that are large and made of small files (they
        make every start and every read slow). See the two thresholds.""",
    )
    small_files_min_total = IntTrait(
        1_000_000_000, config=True, help="The small-files rule applies to versions above this many bytes."
    )
    small_files_min_average = IntTrait(
        1_000_000, config=True, help="...whose average file is smaller than this many bytes."
    )

    def check_tree(self, root: str | os.PathLike, label: str) -> tuple[int, int]:
        """(bytes, files) of a tree about to become a version, or a 400 saying what to fix."""
        size, files, bad = 0, 0, []
        with paths.Tree(root) as tree:
            for e in tree.walk():
                mode = e.st.st_mode
                rel = os.fsdecode(e.rel)
                if stat.S_ISREG(mode):
                    files += 1
                    size += e.st.st_size
                elif stat.S_ISLNK(mode):
                    if paths.link_escapes(e.rel, tree.readlink(e.rel)):
                        bad.append(i18n.N_("{path} (a link pointing outside)").format(path=rel))
                elif not stat.S_ISDIR(mode):
                    bad.append(i18n.N_("{path} (a device, pipe or socket)").format(path=rel))
                if len(bad) > 100:
                    break
        if bad:
            if len(bad) > 5:
                raise UserError(
                    400,
                    "{label} cannot become a dataset: it has entries that point outside it or are not "
                    "files: {entries}; and {more} more. Remove or replace them and try again.",
                    label=label,
                    entries="; ".join(bad[:5]),
                    more=len(bad) - 5,
                )
            raise UserError(
                400,
                "{label} cannot become a dataset: it has entries that point outside it or are not "
                "files: {entries}. Remove or replace them and try again.",
                label=label,
                entries="; ".join(bad),
            )
        if (
            self.small_files_rule
            and size > self.small_files_min_total
            and files
            and size / files < self.small_files_min_average
        ):
            raise UserError(
                400,
                "{label} has {files:,} files averaging {average_kb:,.0f} kB ({total_gb:,.2f} GB in "
                "all). Datasets over {over_gb:g} GB must have files of "
                "{min_average_mb:g} MB or more on average: pack the small files into "
                "a few large ones (HDF5, LMDB, TFRecord, or tar archives) and try again.",
                label=label,
                files=files,
                average_kb=size / files / 1e3,
                total_gb=size / 1e9,
                over_gb=self.small_files_min_total / 1e9,
                min_average_mb=self.small_files_min_average / 1e6,
            )
        return size, files
