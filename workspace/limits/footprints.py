"""Footprints: what a user's stored objects take, each file shared between them counted once.

A user's **footprint** is the bytes and files of what they own in the store:
the outputs (snapshots) of their workspaces and the versions of their
datasets, and the layers of the images they built. A file shared by several
of them (unchanged between executions of a lineage, or a dataset version made
from an output) is counted once: that is what the store keeps of it. Files
are identified by inode, ctime, mtime and size, which a snapshot or a hard
link keeps and any change alters. quotas.py records footprints and holds them
against the users' limits.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
from dataclasses import dataclass, field

from sqlalchemy import func, select

from workspace import i18n
from workspace.datasets import Dataset, DatasetVersion
from workspace.db import iso
from workspace.executions import Execution, Snapshot, Workspace
from workspace.images import user as user_images
from workspace.store import paths


@dataclass
class Item:
    """One object that takes space: an output or a dataset version."""

    kind: str  # output | dataset | image
    label: str  # what the user reads: “thesis” #3, alice/images v2
    ref: dict  # {"workspace", "number"} or {"dataset", "version"}
    created: str | None
    bytes: int = 0
    files: int = 0
    # what deleting it alone would free (files no other object shares)
    unique_bytes: int = 0
    unique_files: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def item_label(item: dict, locale: str = "en") -> str:
    """What the user reads of a stored item (`Item.as_dict()`, as `storage_usage.items` keeps it), in `locale`:
    made again from its kind and ref, so a measurement taken in one language reads in any."""
    kind, ref = item.get("kind"), item.get("ref") or {}
    try:
        if kind == "output":
            return i18n.translate(
                locale, "the output of “{workspace}” #{number}", workspace=ref["workspace"], number=ref["number"]
            )
        if kind == "dataset":
            return i18n.translate(
                locale, "dataset {dataset} v{version}", dataset=ref["dataset"], version=ref["version"]
            )
        if kind == "image":
            return i18n.translate(locale, "image {image}", image=ref["image"])
    except KeyError:
        pass
    return item.get("label", "")


@dataclass
class Footprint:
    bytes: int = 0
    files: int = 0
    items: list[Item] = field(default_factory=list)


def identity(st: os.stat_result) -> tuple:
    """What identifies one stored file across the trees of a store.

    A hard link (copy store) is the same inode; a btrfs snapshot keeps inode
    numbers and their times; any change to a file alters its ctime.
    """
    return (st.st_ino, st.st_ctime_ns, st.st_mtime_ns, st.st_size)


def footprint(trees: list[tuple[Item, os.PathLike]]) -> Footprint:
    """Bytes and files of the trees together, each shared file once; per tree its own figures."""
    owners: dict[tuple, list] = {}  # identity -> [size, first item index, shared by several]
    for index, (item, path) in enumerate(trees):
        if not os.path.isdir(path):
            continue
        for e in paths.walk(path):
            if not e.rel or stat.S_ISDIR(e.st.st_mode):
                continue
            size = e.st.st_size if stat.S_ISREG(e.st.st_mode) else 0
            item.files += 1
            item.bytes += size
            key = identity(e.st)
            seen = owners.get(key)
            if seen is None:
                owners[key] = [size, index, False]
            elif seen[1] != index:
                seen[2] = True
    total = Footprint(items=[item for item, _ in trees])
    for size, index, shared in owners.values():
        total.files += 1
        total.bytes += size
        if not shared:
            total.items[index].unique_files += 1
            total.items[index].unique_bytes += size
    return total


def owned_trees(session, store, owner: str) -> list[tuple[Item, os.PathLike]]:
    """The user's outputs and dataset versions with their store paths, oldest first."""
    trees = []
    rows = session.execute(
        select(Execution, Workspace, Snapshot)
        .join(Workspace, Execution.workspace_id == Workspace.id)
        .join(Snapshot, Execution.snapshot_id == Snapshot.id)
        .where(Workspace.owner == owner, Snapshot.deleted.is_(None))
        .order_by(Snapshot.created, Snapshot.id)
    )
    for ex, ws, snap in rows:
        ref = {"workspace": ws.name, "number": ex.number}
        item = Item("output", item_label({"kind": "output", "ref": ref}), ref, iso(snap.created))
        trees.append((item, store.snapshot_path(snap.key)))
    versions = session.execute(
        select(DatasetVersion, Dataset)
        .join(Dataset, DatasetVersion.dataset_id == Dataset.id)
        .where(Dataset.owner == owner, DatasetVersion.deleted.is_(None))
        .order_by(DatasetVersion.created, DatasetVersion.id)
    )
    for version, ds in versions:
        ref = {"dataset": ds.ref, "version": version.number}
        item = Item("dataset", item_label({"kind": "dataset", "ref": ref}), ref, iso(version.created))
        trees.append((item, store.dataset_path(version.key)))
    return trees


def owned_images(session, owner: str) -> list[Item]:
    """The user's built images (#18), each its own layer's bytes (no files: they are the engine's)."""
    items = []
    for i in user_images.owned(session, owner):
        ref = {"image": i.full_name}
        label = item_label({"kind": "image", "ref": ref})
        items.append(Item("image", label, ref, iso(i.created), i.bytes, 0, i.bytes, 0))
    return items


def last_change(session, owner: str) -> dt.datetime | None:
    """When the user's stored objects last changed (a save, a new version, a deletion)."""
    times = [
        session.scalar(
            select(func.max(Snapshot.created))
            .join(Execution, Execution.snapshot_id == Snapshot.id)
            .join(Workspace, Execution.workspace_id == Workspace.id)
            .where(Workspace.owner == owner)
        ),
        session.scalar(
            select(func.max(Snapshot.deleted))
            .join(Execution, Execution.snapshot_id == Snapshot.id)
            .join(Workspace, Execution.workspace_id == Workspace.id)
            .where(Workspace.owner == owner)
        ),
        session.scalar(select(func.max(DatasetVersion.created)).join(Dataset).where(Dataset.owner == owner)),
        session.scalar(select(func.max(DatasetVersion.deleted)).join(Dataset).where(Dataset.owner == owner)),
        user_images.last_change(session, owner),
    ]
    times = [t for t in times if t is not None]
    return max(times) if times else None
