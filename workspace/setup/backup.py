"""`workspace-admin backup DEST`: a deployment's backup, incremental, consistent while it runs (docs/backup.md).

    workspace-admin backup DEST [--key-dest DIR] [--keep N] [--every 24h]

What a backup holds, taken in this order so that one taken while workspaces run and save is one state:

1. the workspace database: one consistent copy (backup_db.py). That copy is the moment the backup is of;
2. exactly the saved outputs and dataset versions that copy holds. They are immutable, so each is read
   later as it was at that moment. An output saved after the copy is not in this backup (the next one has
   it); one deleted since is noted in the manifest (`missing`), which a restore records as deleted: never
   a failed backup;
3. JupyterHub's database, the secrets (`secrets.env`, the cookie secret, the SSH gateway's keys), the site's
   configuration (`jupyterhub_config.d/`, `culler_config.py`, the WORKSPACE_* settings it ran with) and the
   ended executions' logs;
4. the manifest, last, then the set is renamed into place: a set with a manifest is complete.

Outputs go to DEST's pool (backup_sets.py), each once: a btrfs store's as `btrfs send` streams, from the
nearest earlier output of its lineage the pool holds (`-p`), so a backup after a small change writes about
that change; a copying store's as plain files, unchanged files hard-linked to the parent's copy. Every
output's content digest (`paths.digest`) is in the manifest: a restore checks each against it.

The key that seals the database's secrets is never put in DEST: whoever holds both reads every student's
SSH keys (docs/admin/security.md, SECURITY.md). `--key-dest DIR` copies it to a place apart, named by its fingerprint.

DEST is root's alone (0700, files 0600) and must be apart from the data directory and the store. Nothing in
an output is followed or run: streams are written by `btrfs send` and copies made through `paths.Tree`.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import os
import shutil
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

from workspace.settings import SECRET_NAMES, Settings
from workspace.setup import backup_db
from workspace.setup.backup_sets import (
    AREAS,
    MANIFEST,
    MARKER,
    POOL,
    BackupError,
    Item,
    Manifest,
    Records,
    choose_parent,
    next_number,
    prune,
    set_name,
    with_parents,
)
from workspace.setup.steps import say
from workspace.store import paths
from workspace.store.btrfs_send import send_to_file, subvolume_ids
from workspace.store.copier import copy_tree, fsync_dir
from workspace.store.homes import PARTIAL, BtrfsHomeStore, HomeStore, HomeStoreError, store_for, valid_key

PREFIX = "backup"
# what of the data directory a set holds besides the databases: (its path in the set, its name in the data dir)
FILES = (
    ("secrets/secrets.env", "secrets.env"),
    ("secrets/jupyterhub_cookie_secret", "jupyterhub_cookie_secret"),
    ("secrets/gateway", "gateway"),
    ("config/jupyterhub_config.d", "jupyterhub_config.d"),
    ("config/culler_config.py", "culler_config.py"),
    ("config/environment.env", None),  # the WORKSPACE_* settings it ran with (no secret): told at a restore
    ("records/execution-logs", "execution-logs"),
)
KEY_TAG = b"workspace-vault-key\0"


def fingerprints(key_file: Path) -> list[str]:
    """The fingerprints of the keys in a vault key file (one per key line): what a restore checks its key by."""
    lines = [line for line in key_file.read_bytes().split() if line and not line.startswith(b"#")]
    return [hashlib.sha256(KEY_TAG + line).hexdigest()[:32] for line in lines]


def inside(path: Path, other: Path) -> bool:
    """Whether `path` is `other` or beneath it."""
    return path == other or other in path.parents


def check_dest(settings: Settings, dest: Path) -> Path:
    """DEST made ready (0700, marked as a backup's); BackupError if it is not a place a backup may go."""
    dest = Path(os.path.abspath(dest))
    dest = dest.resolve() if dest.exists() else dest
    for what, place in (("data directory", settings.data_dir), ("home store", settings.store_dir)):
        place = Path(place).resolve()
        if inside(dest, place) or inside(place, dest):
            raise BackupError(
                f"{dest} {'is inside' if inside(dest, place) else 'contains'} the {what} {place}; "
                "back up to a directory apart from it (another disk, best)."
            )
    if dest.exists() and not dest.is_dir():
        raise BackupError(f"{dest} is not a directory; give a directory for the backups.")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / MARKER).is_file():
        raise BackupError(f"{dest} holds other files and is not a backup of this kind; give an empty or new directory.")
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(dest, 0o700)  # the backups hold every home and secret: root's alone
    if not (dest / MARKER).is_file():
        write_private(dest / MARKER, b"A workspace deployment's backups (workspace-admin backup; docs/backup.md).\n")
    return dest


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path`, 0600 and durable (never through a link)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


@contextmanager
def locked(dest: Path):
    """One backup into DEST at a time (a scheduled one and a hand-run one)."""
    fd = os.open(dest / ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BackupError(f"Another backup into {dest} is running; wait for it to end.") from None
    try:
        yield
    finally:
        os.close(fd)


def sets(dest: Path) -> list[tuple[str, Manifest]]:
    """The complete sets in DEST, oldest first."""
    found = []
    for entry in sorted(dest.iterdir()):
        if entry.is_dir() and (entry / MANIFEST).is_file():
            found.append((entry.name, Manifest.from_json((entry / MANIFEST).read_text(), str(entry / MANIFEST))))
    return found


def _remove(path: Path) -> int:
    """Remove a pool entry or a set; the bytes it held that no other name holds."""
    if path.is_dir() and not path.is_symlink():
        freed = sum(e.st.st_size for e in paths.walk(path) if e.is_file() and e.st.st_nlink == 1)
        shutil.rmtree(path)
        return freed
    freed = path.lstat().st_size
    path.unlink()
    return freed


def clean_partials(dest: Path) -> None:
    """What an interrupted backup left (`.partial-*`): never part of a set."""
    for parent in (dest, *(dest / POOL / area for area in AREAS)):
        for partial in parent.glob(PARTIAL + "*") if parent.is_dir() else ():
            _remove(partial)


# -- the outputs --------------------------------------------------------------------------------------


class Outputs:
    """Sends a set's outputs and dataset versions into the pool, each once, from the stores that hold them."""

    def __init__(self, dest: Path, stores: list[HomeStore], pool: dict[tuple[str, str], Item], name: str):
        self.dest, self.stores, self.pool, self.name = dest, stores, pool, name
        self.sent_bytes, self.sent, self.reused, self.missing = 0, 0, 0, []
        self.started = self.last = time.monotonic()

    def holder(self, area: str, key: str) -> HomeStore | None:
        try:
            valid_key(key)
        except ValueError:
            return None  # no store holds such a name: noted as missing
        return next((s for s in self.stores if (Path(s.root) / area / key).is_dir()), None)

    def take(self, wanted: list[tuple[str, str, list[str]]]) -> list[Item]:
        """The pool's item of each wanted output (sent now if the pool lacks it); the missing ones noted."""
        items = []
        for n, (area, key, candidates) in enumerate(wanted, 1):
            if (area, key) in self.pool:
                items.append(self.pool[(area, key)])
                self.reused += 1
            elif (item := self.send(area, key, candidates)) is not None:
                self.pool[item.ref] = item
                items.append(item)
            self.progress(n, len(wanted))
        return items

    def send(self, area: str, key: str, candidates: list[str]) -> Item | None:
        store = self.holder(area, key)
        if store is None:
            reason = "not in this machine's stores (deleted after the database was copied, or on a node not yet copied)"
            self.missing.append({"area": area, "key": key, "reason": reason})
            return None
        parent = choose_parent(
            candidates, lambda k: (area, k) in self.pool, lambda k: (Path(store.root) / area / k).is_dir()
        )
        try:
            item = self.write_private(store, area, key, parent)
        except (HomeStoreError, OSError) as e:
            if self.holder(area, key) is not None:
                raise BackupError(f"Backing up {area[:-1]} {key} failed ({e}); check the store, then back up again.")
            self.missing.append({"area": area, "key": key, "reason": "deleted while the backup ran"})
            return None
        self.sent += 1
        self.sent_bytes += item.bytes
        return item

    def write_private(self, store: HomeStore, area: str, key: str, parent: str | None) -> Item:
        source = Path(store.root) / area / key
        pool = self.dest / POOL / area
        pool.mkdir(mode=0o700, parents=True, exist_ok=True)
        digest = paths.digest(source)  # immutable: the same now as when it is written below
        if isinstance(store, BtrfsHomeStore):
            partial = pool / f"{PARTIAL}{key}.stream"
            base = Path(store.root) / area / parent if parent else None
            with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb") as out:
                size, sha = send_to_file(store, source, base, out)
                out.flush()
                os.fsync(out.fileno())
            os.rename(partial, pool / f"{key}.stream")
            identity = subvolume_ids(store, source).identity
            fsync_dir(pool)
            return Item(area, key, "stream", digest, size, parent, sha, identity, since=self.name)
        partial = pool / f"{PARTIAL}{key}"
        copied = copy_tree(source, partial, link_from=pool / parent if parent else None, durable=True)
        os.rename(partial, pool / key)
        fsync_dir(pool)
        return Item(area, key, "tree", digest, copied.bytes, parent, since=self.name)

    def progress(self, done: int, total: int, every: float = 2.0) -> None:
        now = time.monotonic()
        if now - self.last >= every or done == total:
            seconds = max(now - self.started, 1e-6)
            say(
                PREFIX,
                f"outputs: {done} of {total} ({self.sent} sent, {self.reused} already in the backup), "
                f"{self.sent_bytes / 1e6:,.1f} MB written, {self.sent_bytes / 1e6 / seconds:,.1f} MB/s",
            )
            self.last = now


# -- secrets, configuration, records ------------------------------------------------------------------


def environment_file(environ=os.environ) -> bytes:
    """The WORKSPACE_* settings of this run, without the secrets (they are in secrets.env) or passwords."""
    lines = []
    for name in sorted(environ):
        if (
            not name.startswith("WORKSPACE_")
            or name in SECRET_NAMES
            or any(word in name for word in ("PASSWORD", "TOKEN", "SECRET"))
        ):
            continue
        value = environ[name]
        if name.endswith("_URL") and "://" in value:
            value = make_url(value).render_as_string(hide_password=True)
        lines.append(f"{name}={value}\n")
    return "".join(lines).encode()


def copy_files(settings: Settings, set_dir: Path, previous: Path | None) -> list[dict]:
    """Copy the secrets, the configuration and the records into the set; what the manifest says of each.

    A tree's files unchanged since the previous set are hard-linked to its copy (logs add up)."""
    entries = []
    for inside, name in FILES:
        target = set_dir / inside
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if name is None:
            write_private(target, environment_file())
            entries.append({"path": inside, "to": "environment.env", "kind": "file", "digest": _sha(target)})
            continue
        source = settings.path(name)
        if source.is_symlink():
            say(PREFIX, f"{source} is a link, not backed up: back up what it points to yourself")
            continue
        if source.is_file():
            write_private(target, source.read_bytes())
            entries.append({"path": inside, "to": name, "kind": "file", "digest": _sha(target)})
        elif source.is_dir():
            earlier = previous / inside if previous is not None and (previous / inside).is_dir() else None
            copy_tree(source, target, link_from=earlier, durable=True)
            entries.append({"path": inside, "to": name, "kind": "tree", "digest": paths.digest(target)})
    return entries


def _sha(path: Path) -> str:
    return backup_db.sha256_of(path)


def check_key_dest(settings: Settings, key_dest: Path, dest: Path) -> Path:
    """Where --key-dest puts the key: apart from the backups and the data directory (checked before anything
    is written)."""
    key_dest = Path(os.path.abspath(key_dest))
    if inside(key_dest, dest) or inside(dest, key_dest) or inside(key_dest, settings.data_dir):
        raise BackupError(f"--key-dest {key_dest} must be apart from the backups {dest} and the data directory.")
    return key_dest


def save_key(settings: Settings, key_dest: Path | None, dest: Path) -> list[str]:
    """The fingerprints of the vault's keys; with `key_dest`, the key file copied there (apart from DEST)."""
    key = Path(settings.secret_key_file)
    if not key.is_file():
        return []
    found = fingerprints(key)
    if key_dest is None:
        say(
            PREFIX,
            f"the key that seals the database's secrets ({key}) is not in {dest}, by design: whoever holds both "
            "reads every student's SSH keys. Keep a copy apart once (--key-dest DIR): a restore needs it",
        )
        return found
    key_dest = check_key_dest(settings, key_dest, dest)
    key_dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    copy = key_dest / f"workspace-{found[0][:12]}.key"
    if not copy.is_file() or copy.read_bytes() != key.read_bytes():
        write_private(copy, key.read_bytes())
    say(PREFIX, f"the key that seals the database's secrets is in {copy}")
    return found


# -- a backup -----------------------------------------------------------------------------------------


def sources(settings: Settings) -> list[HomeStore]:
    """The stores a backup reads outputs from: the hub's, then the store of record (WORKSPACE_RECORD_STORE)."""
    if not Path(settings.store_dir).is_dir():
        raise BackupError(f"The home store {settings.store_dir} does not exist; is WORKSPACE_STORE_DIR right?")
    stores = [store_for(settings.store_dir, clean=False)]
    record = os.environ.get("WORKSPACE_RECORD_STORE")
    if record and Path(record).is_dir():
        stores.append(store_for(record, clean=False, backend="btrfs"))
    return stores


def backup(settings: Settings, dest: Path, key_dest: Path | None = None, keep: int | None = None) -> Manifest:
    """Back the deployment of `settings` up into a new set in DEST (see the module's text); its manifest."""
    started = time.monotonic()
    if keep is not None and keep < 1:
        raise BackupError("--keep must keep at least one backup.")
    if key_dest is not None:
        check_key_dest(settings, key_dest, Path(os.path.abspath(dest)))
    dest = check_dest(settings, dest)
    try:
        with locked(dest):
            return _backup(settings, dest, key_dest, keep, started)
    except OSError as e:
        raise BackupError(
            f"Writing the backup into {dest} failed ({e.strerror or e}: {e.filename}); free space there or fix "
            "its permissions, then back up again (the unfinished one is removed then)."
        ) from e


def _backup(settings: Settings, dest: Path, key_dest: Path | None, keep: int | None, started: float) -> Manifest:
    """One backup into DEST, whose lock this process holds (see `backup`)."""
    clean_partials(dest)
    earlier = sets(dest)
    pool = {i.ref: i for _, m in earlier for i in m.items if (dest / i.path).exists()}
    now = dt.datetime.now(dt.timezone.utc)
    name = set_name(next_number(n for n, _ in earlier), now.strftime("%Y%m%dT%H%M%SZ"))
    work = dest / f"{PARTIAL}{name}"
    work.mkdir(mode=0o700)
    (work / "db").mkdir(mode=0o700)
    manifest = Manifest(name=name, created=now.isoformat(timespec="seconds"), store="copy")
    records = _databases(settings, work, manifest)
    stores = sources(settings)
    manifest.store = stores[0].kind
    outputs = Outputs(dest, stores, pool, name)
    manifest.items = _chain(outputs.take(records.wanted()), pool, dest)
    manifest.missing = outputs.missing
    manifest.files = copy_files(settings, work, dest / earlier[-1][0] if earlier else None)
    manifest.key_fingerprints = save_key(settings, key_dest, dest)
    manifest.stats = {
        "sent_bytes": outputs.sent_bytes,
        "sent": outputs.sent,
        "reused": outputs.reused,
        "seconds": round(time.monotonic() - started, 3),
    }
    write_private(work / MANIFEST, manifest.to_json().encode())
    fsync_dir(work)
    os.rename(work, dest / name)
    fsync_dir(dest)
    _tell(manifest, dest)
    if keep is not None:
        prune_dest(dest, keep)
    return manifest


def _chain(items: list[Item], pool: dict[tuple[str, str], Item], dest: Path) -> list[Item]:
    """The set's items and the parents their deltas need."""
    try:
        return with_parents(items, pool)
    except KeyError as e:
        raise BackupError(
            f"The pool in {dest} lacks {e.args[0][1]}, a parent other backups there need (removed by hand?); "
            "back up into a new directory."
        ) from None


def _databases(settings: Settings, work: Path, manifest: Manifest) -> Records:
    """Copy the workspace database first (the backup's moment: its records say what else to back up), then
    JupyterHub's."""
    t = time.monotonic()
    manifest.databases["workspace"], records = backup_db.copy(settings.db_url, work / "db", "workspace", True)
    manifest.databases["hub"], _ = backup_db.copy(settings.hub_db_url, work / "db", "jupyterhub")
    size = sum(d["bytes"] for d in manifest.databases.values())
    say(
        PREFIX,
        f"databases copied ({manifest.databases['workspace']['kind']}): {size / 1e6:,.1f} MB in "
        f"{time.monotonic() - t:.1f} s",
    )
    return records


def _tell(manifest: Manifest, dest: Path) -> None:
    s = manifest.stats
    outputs = sum(1 for i in manifest.outputs if i.area == "snapshots")
    versions = sum(1 for i in manifest.outputs if i.area == "datasets")
    say(
        PREFIX,
        f"backup {manifest.name} in {dest}: {outputs} saved outputs and {versions} dataset versions "
        f"({s['sent']} sent, {s['reused']} already in the backup), {s['sent_bytes'] / 1e6:,.1f} MB of outputs "
        f"written in {s['seconds']:.1f} s",
    )
    for m in manifest.missing:
        say(PREFIX, f"not in this backup: {m['area'][:-1]} {m['key']}, {m['reason']}")


def prune_dest(dest: Path, keep: int) -> None:
    """Keep the newest `keep` sets and the pool entries they use; the rest goes."""
    gone, used = prune(sets(dest), keep)
    freed = sum(_remove(dest / name) for name in gone)
    entries = 0
    for area in AREAS:
        for entry in sorted((dest / POOL / area).iterdir()) if (dest / POOL / area).is_dir() else ():
            if f"{POOL}/{area}/{entry.name}" not in used:
                freed += _remove(entry)
                entries += 1
    if gone or entries:
        say(PREFIX, f"pruned {len(gone)} old backup(s) and {entries} outputs only they used: {freed / 1e6:,.1f} MB")


def every(settings: Settings, dest: Path, seconds: float, key_dest: Path | None, keep: int | None) -> None:
    """Back up now and then every `seconds` (a service the operator runs); a failed one is told and the next
    one is tried at its time."""
    say(PREFIX, f"backing up to {dest} every {seconds:,.0f} s on {socket.gethostname()}, until stopped")
    while True:
        started = time.monotonic()
        try:
            backup(settings, dest, key_dest, keep)
        except BackupError as e:
            say(PREFIX, f"error: {e} The next backup is tried at its time.")
        time.sleep(max(0.0, started + seconds - time.monotonic()))
