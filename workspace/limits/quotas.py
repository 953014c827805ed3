"""Storage quotas: what a user's saved data takes, against their limit.

A user's **footprint** (footprints.py) is the bytes and files of what they
own in the store, a file shared by several of their objects counted once.

The **quota** (`StorageQuota`, traitlets) is bytes and files per user, with
overrides per JupyterHub group (a member gets the largest of their groups')
and per user (wins). Over it, a new start is refused with a sentence naming
what takes the space, except a start in **cleanup mode**: a small,
time-limited workspace whose home may not grow, so that a user can always get
in and delete files. At `warn_fraction` (90 %) a start, the storage page and
the API warn.

Footprints are measured by a walk of the trees and stored in
`storage_usage`; a measurement older than the user's newest save or deletion
is stale and taken again.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import JSON, BigInteger, DateTime, Integer, String, cast, func, select
from sqlalchemy.orm import Mapped, mapped_column
from traitlets import Dict, Float, Int, Unicode
from traitlets.config import LoggingConfigurable

from workspace import i18n
from workspace.db import Base, Database, iso, utcnow
from workspace.errors import UserError
from workspace.executions import Execution, Snapshot, Workspace
from workspace.i18n import N_
from workspace.limits.footprints import footprint, item_label, last_change, owned_images, owned_trees
from workspace.limits.resource_types import ResourceType
from workspace.sizes import parse_bytes


class StorageUsage(Base):
    """The last measured footprint of one user."""

    __tablename__ = "storage_usage"

    owner: Mapped[str] = mapped_column(String(255), primary_key=True)
    bytes: Mapped[int] = mapped_column(BigInteger)
    files: Mapped[int] = mapped_column(Integer)
    items: Mapped[list | None] = mapped_column(JSON, nullable=True)
    measured_at: Mapped[dt.datetime] = mapped_column(DateTime)


@dataclass(frozen=True)
class Limit:
    bytes: int | None  # None: no limit
    files: int | None

    def as_dict(self) -> dict:
        return {"bytes": self.bytes, "files": self.files}


def _limit(d: dict, where: str) -> Limit:
    unknown = set(d) - {"bytes", "files"}
    if unknown:
        raise ValueError(f"quota {where}: unknown setting(s) {', '.join(sorted(unknown))}; use bytes, files")
    return Limit(parse_bytes(d.get("bytes")) or None, int(d["files"]) if d.get("files") else None)


def _larger(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


class StorageQuota(LoggingConfigurable):
    """How much each user may keep in the store (outputs and dataset versions)."""

    bytes = Unicode(
        "50G",
        config=True,
        help="""Bytes a user may keep (their outputs and dataset versions, a
        shared file counted once), like "50G"; empty for no limit.""",
    )
    files = Int(
        1_000_000,
        config=True,
        help="Files a user may keep (the same objects as `bytes`); 0 for no limit.",
    )
    groups = Dict(
        config=True,
        help="""Overrides per JupyterHub group: {"staff": {"bytes": "1T", "files": 5000000}}.
        A member of several gets the largest of each figure.""",
    )
    users = Dict(
        config=True,
        help="""Overrides per user, winning over groups: {"alice": {"bytes": "200G"}}.
        A figure left out is the default's.""",
    )
    warn_fraction = Float(
        0.9,
        config=True,
        help="Above this fraction of either figure, starts and the storage page warn.",
    )
    cleanup_type = Dict(
        {"description": "Cleanup mode: delete files while over quota", "cpu": 0.5, "memory": "1G", "max_runtime": 1800},
        config=True,
        help="""The resource type of a start in cleanup mode (the settings of
        a resource type; no GPUs, never queued). Its home may grow by at most
        `cleanup_slack` (JupyterLab's own state), so the user can only free
        space.""",
    )
    cleanup_slack = Unicode(
        "64M",
        config=True,
        help="How much a home in cleanup mode may grow (JupyterLab writes a little state).",
    )

    def default_limit(self) -> Limit:
        return Limit(parse_bytes(self.bytes) or None, self.files or None)

    def limit_for(self, user: str, groups) -> Limit:
        """The user's limit: their own override, else the largest of their groups', else the default."""
        default = self.default_limit()
        mine = [self._override(self.groups[g], default, f"of group {g}") for g in sorted(groups) if g in self.groups]
        limit = (
            Limit(_fold(_larger, [m.bytes for m in mine]), _fold(_larger, [m.files for m in mine])) if mine else default
        )
        if user in self.users:
            limit = self._override(self.users[user], limit, f"of user {user}")
        return limit

    @staticmethod
    def _override(d: dict, base: Limit, where: str) -> Limit:
        """`d`'s figures over `base`'s (a figure `d` leaves out is `base`'s; 0 or "" is no limit)."""
        given = _limit(d, where)
        return Limit(given.bytes if "bytes" in d else base.bytes, given.files if "files" in d else base.files)

    def cleanup_resource_type(self) -> ResourceType:
        settings = {"name": "cleanup", **self.cleanup_type}
        settings.pop("gpus", None)
        settings.pop("capacity", None)
        return ResourceType.from_config(settings)

    @property
    def slack(self) -> int:
        return parse_bytes(self.cleanup_slack) or 0


def _fold(fn, values):
    out = values[0]
    for v in values[1:]:
        out = fn(out, v)
    return out


# -- measuring -------------------------------------------------------------------


# One measurement per user at a time (a second asker waits for it and reuses its
# result); different users' measurements, and so their starts, never wait on each other.
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_of(owner: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(owner, threading.Lock())


def measure(db: Database, store, owner: str) -> StorageUsage:
    """Walk the user's stored objects and record their footprint (blocking)."""
    with _lock_of(owner):
        started = utcnow()
        with db.session() as s:
            trees = owned_trees(s, store, owner)
            images = owned_images(s, owner)
        fp = footprint(trees)
        for item in images:  # an image's own layer is its alone (a rebuild replaces it)
            fp.items.append(item)
            fp.bytes += item.bytes
        with db.session() as s:
            row = s.get(StorageUsage, owner) or StorageUsage(owner=owner)
            row.bytes, row.files, row.measured_at = fp.bytes, fp.files, started
            row.items = [i.as_dict() for i in fp.items]
            s.add(row)
            return row


def measure_soon(db: Database, store, owner: str) -> None:
    """Measure the user's footprint again in a worker thread, not waiting for it (after a deletion)."""
    import asyncio

    asyncio.get_running_loop().run_in_executor(None, measure, db, store, owner)


def current(db: Database, store, owner: str) -> StorageUsage:
    """The user's footprint, measured again if anything changed since the last measurement."""
    with db.session() as s:
        row = s.get(StorageUsage, owner)
        changed = last_change(s, owner)
        if row is not None and (changed is None or changed <= row.measured_at):
            return row
    return measure(db, store, owner)


def per_user(db: Database) -> list[dict]:
    """Every user's outputs (how many, their bytes and files, each output's own figures summed), the
    largest first, with their footprint as last measured (what the quota counts: outputs and dataset
    versions, shared data once), for the admin page (blocking). A figure not measured yet is None."""
    # cast: PostgreSQL sums a BIGINT column as NUMERIC (a Decimal, which JSON cannot carry)
    total_bytes = cast(func.coalesce(func.sum(Snapshot.bytes), 0), BigInteger)
    with db.session() as s:
        outputs = s.execute(
            select(
                Workspace.owner,
                func.count(Snapshot.id),
                total_bytes,
                cast(func.coalesce(func.sum(Snapshot.files), 0), BigInteger),
            )
            .join(Execution, Execution.workspace_id == Workspace.id)
            .join(Snapshot, Execution.snapshot_id == Snapshot.id)
            .where(Snapshot.deleted.is_(None))
            .group_by(Workspace.owner)
            .order_by(total_bytes.desc())
        ).all()
        rows = {o: {"owner": o, "outputs": n, "bytes": b, "files": f, "footprint": None} for o, n, b, f in outputs}
        for u in s.scalars(select(StorageUsage)):
            row = rows.setdefault(u.owner, {"owner": u.owner, "outputs": 0, "bytes": 0, "files": 0})
            row["footprint"] = {"bytes": u.bytes, "files": u.files, "at": iso(u.measured_at)}
        return list(rows.values())


# -- the verdict -----------------------------------------------------------------------


def gb(n: int, locale: str = "en") -> str:
    if n >= 1e9:
        return f"{n / 1e9:,.1f} GB"
    if n >= 1e6:
        return f"{n / 1e6:,.1f} MB"
    if n >= 1e3:
        return f"{n / 1e3:,.0f} kB"
    return i18n.translate(locale, "{count} bytes", count=n)


class QuotaError(UserError):
    """The user's error about their storage, whose params are phrases of their own (the figures, what takes
    the space, what was refused): `params(locale)` makes them in a reader's language, so `in_locale` says
    the whole sentence in it. `message` is a literal marked `N_()` (Babel extracts it there)."""

    def __init__(self, status: int, message: str, params: Callable[[str], dict]):
        self.localized_params = params
        super().__init__(status, message, **params(i18n.DEFAULT))

    def in_locale(self, locale: str) -> str:
        return i18n.translate(locale, self.template, **self.localized_params(locale))


@dataclass
class Status:
    usage: StorageUsage
    limit: Limit
    warn_fraction: float

    @property
    def fractions(self) -> tuple[float, float]:
        fb = self.usage.bytes / self.limit.bytes if self.limit.bytes else 0.0
        ff = self.usage.files / self.limit.files if self.limit.files else 0.0
        return fb, ff

    @property
    def over(self) -> bool:
        return any(f > 1 for f in self.fractions)

    @property
    def near(self) -> bool:
        return any(f >= self.warn_fraction for f in self.fractions)

    def figures(self, locale: str = "en") -> str:
        """`2.0 MB of 1.0 GB, 12 of 1,000 files` (a figure without a limit alone), in `locale`."""
        used, files = gb(self.usage.bytes, locale), self.usage.files
        limit = gb(self.limit.bytes, locale) if self.limit.bytes else None
        if limit and self.limit.files:
            return i18n.translate(
                locale,
                "{used} of {limit}, {files:,} of {files_limit:,} files",
                used=used,
                limit=limit,
                files=files,
                files_limit=self.limit.files,
            )
        if limit:
            return i18n.translate(locale, "{used} of {limit}, {files:,} files", used=used, limit=limit, files=files)
        if self.limit.files:
            return i18n.translate(
                locale,
                "{used}, {files:,} of {files_limit:,} files",
                used=used,
                files=files,
                files_limit=self.limit.files,
            )
        return i18n.translate(locale, "{used}, {files:,} files", used=used, files=files)

    def largest_first(self) -> list[dict]:
        """What takes the space, the largest first (bytes, then files)."""
        return sorted(self.usage.items or [], key=lambda i: (i["bytes"], i["files"]), reverse=True)

    def biggest(self, n: int = 3, locale: str = "en") -> str:
        items = self.largest_first()[:n]
        # the separator of a list of items (each with its figures in brackets)
        return i18n.translate(locale, "; ").join(
            i18n.translate(
                locale,
                "{item} ({size}, {files:,} files)",
                item=item_label(i, locale),
                size=gb(i["bytes"], locale),
                files=i["files"],
            )
            for i in items
        )

    def room(self, reserved_bytes: int = 0) -> tuple[int | None, int | None]:
        """(bytes, files) the user may still add (None: no limit), less `reserved_bytes` (uploads under way)."""
        b = max(0, self.limit.bytes - self.usage.bytes - reserved_bytes) if self.limit.bytes else None
        f = max(0, self.limit.files - self.usage.files) if self.limit.files else None
        return b, f

    def refuse_beyond(self, what: str, size: int, reserved_bytes: int = 0, **what_params) -> None:
        """A 413 with the figures when `size` more bytes would pass the quota. `what` is what is refused, a
        literal marked `N_()` (“Uploading {filename}”) with its placeholders from `what_params`."""
        left, files_left = self.room(reserved_bytes)

        def params(locale: str) -> dict:
            return {
                "what": i18n.translate(locale, what, **what_params),
                "size": gb(size, locale),
                "left": gb(left, locale) if left is not None else "",
                "held": gb(reserved_bytes, locale),
                "figures": self.figures(locale),
            }

        if files_left == 0:
            raise QuotaError(
                413,
                N_(
                    "{what} is refused: your storage has no files left in its quota ({figures}). "
                    "Free space on the Storage page first."
                ),
                params,
            )
        if left is not None and size > left:
            if reserved_bytes:
                raise QuotaError(
                    413,
                    N_(
                        "{what} is refused: it needs {size} but your storage quota leaves {left} ({held} of it "
                        "held by uploads under way) ({figures}). Free space on the Storage page, or ask for a "
                        "larger quota."
                    ),
                    params,
                )
            raise QuotaError(
                413,
                N_(
                    "{what} is refused: it needs {size} but your storage quota leaves {left} ({figures}). "
                    "Free space on the Storage page, or ask for a larger quota."
                ),
                params,
            )

    def warning(self, locale: str = "en") -> str | None:
        if self.over:
            return i18n.translate(
                locale,
                "Your storage is over its quota: {figures}. A new start is refused until you free space (a start "
                "in cleanup mode still works).",
                figures=self.figures(locale),
            )
        if self.near:
            return i18n.translate(
                locale,
                "Your storage is nearly full: {figures}. Delete outputs or dataset versions you no longer need on "
                "the Storage page.",
                figures=self.figures(locale),
            )
        return None

    def refusal(self, storage_url: str) -> UserError:
        """The user's 403 of a start over the quota (a `QuotaError`: it reads in the user's language whole)."""

        def params(locale: str) -> dict:
            return {"figures": self.figures(locale), "biggest": self.biggest(locale=locale), "storage_url": storage_url}

        if self.largest_first():
            return QuotaError(
                403,
                N_(
                    "Your storage is over its quota ({figures}), so a new start is refused. The most space is "
                    "taken by {biggest}. Free space on the Storage page ({storage_url}): delete outputs or dataset "
                    "versions you no longer need. To delete files from your home, start the workspace in cleanup "
                    "mode (a small workspace for a short time, whose home cannot grow)."
                ),
                params,
            )
        return QuotaError(
            403,
            N_(
                "Your storage is over its quota ({figures}), so a new start is refused. Free space on the Storage "
                "page ({storage_url}): delete outputs or dataset versions you no longer need. To delete files "
                "from your home, start the workspace in cleanup mode (a small workspace for a short time, whose "
                "home cannot grow)."
            ),
            params,
        )

    def as_dict(self, locale: str = "en") -> dict:
        fb, ff = self.fractions
        return {
            "usage": {"bytes": self.usage.bytes, "files": self.usage.files},
            "limit": self.limit.as_dict(),
            "fraction": {"bytes": round(fb, 4), "files": round(ff, 4)},
            "over": self.over,
            "warning": self.warning(locale),
            "measured_at": iso(self.usage.measured_at),
            "items": self.usage.items or [],
        }


def status(db: Database, store, policy: StorageQuota, owner: str, groups) -> Status:
    """The user's footprint against their quota (blocking: may measure)."""
    return Status(current(db, store, owner), policy.limit_for(owner, groups), policy.warn_fraction)


def home_files_notice(files: int, limit: int | None, warn_fraction: float = 0.9, locale: str = "en") -> str | None:
    """What a workspace is told about its home's file count against its limit (None: nothing), in `locale`."""
    if not limit or files < warn_fraction * limit:
        return None
    if files > limit:
        return i18n.translate(
            locale,
            "Your home holds more than {limit:,} files, its limit. Delete files, or pack small files into a few "
            "archives (tar, zip, HDF5), before you stop: a home saved over the limit starts again only in "
            "cleanup mode.",
            limit=limit,
        )
    return i18n.translate(
        locale,
        "Your home holds {files:,} files, near its limit of {limit:,}. Delete files, or pack small files into a "
        "few archives (tar, zip, HDF5), before you stop: a home saved over the limit starts again only in "
        "cleanup mode.",
        files=files,
        limit=limit,
    )


def home_notice(
    used: int, limit: int | None, enforced: bool, warn_fraction: float = 0.9, locale: str = "en"
) -> str | None:
    """What a workspace is told about its home's size against its limit (None: nothing), in `locale`."""
    if not limit or used < warn_fraction * limit:
        return None
    figures = {"used": gb(used, locale), "limit": gb(limit, locale), "fraction": used / limit}
    # a filesystem limit stops writes a block or so short of it: within 1 % is full
    if used >= (0.99 * limit if enforced else limit):
        if enforced:
            return i18n.translate(
                locale,
                "Your home is full: {used} of its {limit} limit ({fraction:.0%}). Writing more fails with “Disk "
                "quota exceeded”; delete files you no longer need (or start with a resource type with a larger "
                "home).",
                **figures,
            )
        return i18n.translate(
            locale,
            "Your home is over its size limit: {used} of its {limit} limit ({fraction:.0%}). It is still saved "
            "in full, but please delete files you no longer need.",
            **figures,
        )
    if enforced:
        return i18n.translate(
            locale,
            "Your home is nearly full: {used} of its {limit} limit ({fraction:.0%}); writing past it fails with "
            "“Disk quota exceeded”. Delete files you no longer need.",
            **figures,
        )
    return i18n.translate(
        locale,
        "Your home is nearly full: {used} of its {limit} limit ({fraction:.0%}); please stay under it. Delete "
        "files you no longer need.",
        **figures,
    )
