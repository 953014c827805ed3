"""A backup's sets and the outputs they share: the manifest, which parent a delta is taken from, the order a
restore receives them in, and what a pruning removes. Pure: no file is read or written here.

A backup directory (DEST) holds numbered sets and one pool of outputs they share:

    DEST/WORKSPACE-BACKUP                  the marker: this directory is a deployment's backup
    DEST/0003-20250301T020000Z/            a set: manifest.json, db/, secrets/, config/, records/
    DEST/pool/snapshots/<key>.stream       a saved output as a btrfs send stream: whole, or the changes
                                           since its parent (an earlier output of its lineage)
    DEST/pool/snapshots/<key>/             a saved output as plain files (the copying store), files
                                           unchanged since its parent's copy hard-linked to it
    DEST/pool/datasets/<key>.stream|<key>/ a dataset version, the same way
    DEST/.partial-*                        being written; the next backup removes it

Saved outputs and dataset versions are immutable, so one already in the pool is never sent again: a set
lists every output its database copy holds (with the pool entry of each) and, `kept=False`, the parents
their deltas need that the deployment has deleted since. So a set's manifest alone says all a restore
receives, in which order (`restore_order`), and a pruning keeps every pool entry a kept set lists
(`prune`): whatever sets are left, each is restorable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace

from workspace.store.homes import valid_key

FORMAT = 1
MARKER = "WORKSPACE-BACKUP"
MANIFEST = "manifest.json"
POOL = "pool"
AREAS = ("snapshots", "datasets")  # the store's directories of immutable trees
FORMS = ("stream", "tree")  # a btrfs send stream, or a plain copy
SET_NAME = re.compile(r"^(\d{4,})-(\d{8}T\d{6}Z)$")
LINEAGE_LIMIT = 50  # how far back along a lineage a parent is looked for (as replicas.lineage)


class BackupError(Exception):
    """A backup or restore cannot go on; `str(err)` is the one sentence the operator reads."""


@dataclass(frozen=True)
class Item:
    """A saved output (`snapshots`) or dataset version (`datasets`) in the pool."""

    area: str
    key: str
    form: str  # "stream" or "tree"
    digest: str  # the tree's `paths.digest`: a restored copy must have the same
    bytes: int  # what its pool entry holds: the stream's bytes, or the copy's new files' bytes
    parent: str | None = None  # the key (same area) whose copy this one is a delta against
    sha256: str | None = None  # a stream file's
    identity: str | None = None  # a stream's subvolume identity (btrfs_send.Ids.identity)
    since: str = ""  # the set that first wrote it
    kept: bool = True  # False: only a parent the set's other items need (the deployment deleted it)

    @property
    def path(self) -> str:
        """Its pool entry, relative to DEST."""
        return f"{POOL}/{self.area}/{self.key}" + (".stream" if self.form == "stream" else "")

    @property
    def ref(self) -> tuple[str, str]:
        return self.area, self.key


@dataclass
class Manifest:
    """What one set holds; written last, so a set with a manifest is complete."""

    name: str
    created: str  # ISO 8601, UTC
    store: str  # the backed-up store's kind: "btrfs" or "copy"
    databases: dict[str, dict] = field(default_factory=dict)  # "workspace"/"hub": kind, file, sha256, bytes
    files: list[dict] = field(default_factory=list)  # secrets, configuration, records: path, to, kind, digest
    items: list[Item] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)  # area, key, reason: in the database copy, not backed up
    key_fingerprints: list[str] = field(default_factory=list)  # of the keys sealing the database's secrets
    stats: dict = field(default_factory=dict)  # sent bytes and items, seconds
    format: int = FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str = "the manifest") -> "Manifest":
        """The manifest in `text`, every name and path in it checked; BackupError saying what is wrong."""
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                raise BackupError(f"{where} has format {data.get('format')!r}; this version reads format {FORMAT}.")
            m = cls(**{k: v for k, v in data.items() if k != "items"}, items=[Item(**i) for i in data["items"]])
            m.check()
            return m
        except BackupError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise BackupError(f"{where} is damaged ({e}); restore from another backup.") from e

    def check(self) -> None:
        if not SET_NAME.match(self.name) or self.store not in ("btrfs", "copy"):
            raise ValueError(f"set name {self.name!r} or store {self.store!r}")
        for item in self.items:
            if item.area not in AREAS or item.form not in FORMS or valid_key(item.key) != item.key:
                raise ValueError(f"item {item.area}/{item.key} ({item.form})")
            if item.parent is not None:
                valid_key(item.parent)
            if item.form == "stream" and not (item.sha256 and item.identity):
                raise ValueError(f"stream {item.key} without its checksum or identity")
        for db in self.databases.values():
            relative(db["file"])
        for f in self.files:
            relative(f["path"])
            relative(f["to"])
            if f["kind"] not in ("file", "tree"):
                raise ValueError(f"file kind {f['kind']!r}")
        restore_order(self.items)  # every parent there, no cycle

    @property
    def outputs(self) -> list[Item]:
        """The items the deployment holds (not the parents kept only for others' deltas)."""
        return [i for i in self.items if i.kept]


def relative(path: str) -> str:
    """`path` if it is a plain relative path (no `..`, not absolute, no empty part); ValueError otherwise."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise ValueError(f"path {path!r} is not inside the backup")
    return path


def set_name(number: int, stamp: str) -> str:
    """The name of set `number` made at `stamp` (YYYYmmddTHHMMSSZ): sorted by name is sorted by age."""
    name = f"{number:04d}-{stamp}"
    if not SET_NAME.match(name):
        raise ValueError(f"bad set name {name!r}")
    return name


def next_number(names: Iterable[str]) -> int:
    return max((int(m.group(1)) for n in names if (m := SET_NAME.match(n))), default=0) + 1


UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_every(text: str) -> float:
    """Seconds in `30m`, `24h`, `7d` (or plain seconds); BackupError for anything else or under a minute."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text or "")
    if not m:
        raise BackupError(f"--every {text!r} is not a time like 30m, 24h or 7d.")
    seconds = float(m.group(1)) * UNITS[m.group(2) or "s"]
    if seconds < 60:
        raise BackupError(f"--every {text!r} is under a minute; back up at most once a minute.")
    return seconds


# -- which parent a delta is taken from -----------------------------------------------------------


@dataclass
class Records:
    """What a backup carries, as the workspace database's copy has it (read by backup_db.read_records)."""

    snapshots: list[tuple[int, str, bool]]  # id, key, deleted
    executions: list[tuple[int, int | None, int | None]]  # id, snapshot id, restored-from execution id
    versions: list[tuple[str, int, int]]  # the dataset versions not deleted: key, dataset id, number

    def wanted(self) -> list[tuple[str, str, list[str]]]:
        """(area, key, the keys a delta may be taken from, nearest first) of every saved output not deleted
        (oldest first: a parent comes before what descends from it) and every dataset version (after the
        earlier versions of its dataset)."""
        keys = {snap_id: key for snap_id, key, _ in self.snapshots}
        parents = lineages(self.executions, keys)
        out = [("snapshots", key, parents.get(key, [])) for _, key, deleted in sorted(self.snapshots) if not deleted]
        earlier: dict[int, list[str]] = {}
        for key, dataset, _ in sorted(self.versions, key=lambda v: (v[1], v[2])):
            out.append(("datasets", key, list(reversed(earlier.setdefault(dataset, [])))))
            earlier[dataset].append(key)
        return out


def lineages(
    executions: Iterable[tuple[int, int | None, int | None]], snapshot_keys: dict[int, str], limit: int = LINEAGE_LIMIT
) -> dict[str, list[str]]:
    """For each output, the keys of the outputs it descends from, nearest first (as replicas.lineage).

    `executions`: (id, snapshot id, restored-from execution id) of every execution; `snapshot_keys`: every
    snapshot's key by id, deleted ones included (a deleted parent may still be in the pool)."""
    rows = {ex_id: (snap_id, source) for ex_id, snap_id, source in executions}
    found = {}
    for ex_id, (snap_id, source) in rows.items():
        if snap_id is None or snap_id not in snapshot_keys:
            continue
        parents, seen = [], {ex_id}
        while source is not None and source not in seen and len(parents) < limit and source in rows:
            seen.add(source)
            parent_snap, source_next = rows[source]
            if parent_snap in snapshot_keys:
                parents.append(snapshot_keys[parent_snap])
            source = source_next
        found[snapshot_keys[snap_id]] = parents
    return found


def choose_parent(candidates: Iterable[str], in_pool: Callable[[str], bool], held: Callable[[str], bool]) -> str | None:
    """The nearest candidate that is in the pool (so a restore has it first) and still in the store (so a
    delta can be taken from it); None: the whole tree goes."""
    return next((key for key in candidates if in_pool(key) and held(key)), None)


# -- restore: parents first -----------------------------------------------------------------------


def restore_order(items: list[Item]) -> list[Item]:
    """`items` with every parent before the deltas taken from it; ValueError if a parent is not among them
    (the set would not restore) or the parents go round in a circle."""
    by_ref = {i.ref: i for i in items}
    ordered, placed = [], set()
    for item in items:
        chain, refs, cur = [], set(), item
        while cur.ref not in placed:
            if cur.ref in refs:
                raise ValueError(f"the parents of {cur.key} go round in a circle")
            chain.append(cur)
            refs.add(cur.ref)
            if cur.parent is None:
                break
            parent = by_ref.get((cur.area, cur.parent))
            if parent is None:
                raise ValueError(f"{cur.key}'s parent {cur.parent} is not in the set")
            cur = parent
        for link in reversed(chain):
            if link.ref not in placed:
                placed.add(link.ref)
                ordered.append(link)
    return ordered


def with_parents(kept: list[Item], pool: dict[tuple[str, str], Item]) -> list[Item]:
    """`kept` and, marked `kept=False`, the pool's items their deltas need that are not among them."""
    items = {i.ref: i for i in kept}
    for item in kept:
        cur = item
        while cur.parent is not None and (cur.area, cur.parent) not in items:
            parent = pool[(cur.area, cur.parent)]
            items[parent.ref] = cur = replace(parent, kept=False)
    return list(items.values())


# -- pruning --------------------------------------------------------------------------------------


def prune(sets: list[tuple[str, Manifest]], keep: int) -> tuple[list[str], set[str]]:
    """(the sets to remove, the pool entries the kept ones use) when only the newest `keep` sets stay."""
    if keep < 1:
        raise BackupError("--keep must keep at least one backup.")
    ordered = sorted(sets, key=lambda s: s[0])
    kept, gone = ordered[-keep:], [name for name, _ in ordered[:-keep]]
    used = {item.path for _, manifest in kept for item in manifest.items}
    return gone, used
