"""`workspace-admin restore SRC`: a backup onto an empty machine (docs/backup.md).

    workspace-admin restore SRC [--set NAME] [--key FILE] [--force]

SRC is a backup directory (its newest set is restored, or `--set NAME`) or one set's directory. In order:

1. the set's manifest is read and every file it names checked against it (each stream's sha256, each
   copy's and each secret's digest, each database copy's sha256) before anything is written: a backup
   changed or cut short is refused and nothing changes;
2. the target is checked: the data directory, the store and the databases empty (or `--force`), the
   database's kind as the backup's, the key given when the database holds sealed secrets;
3. the outputs go into the home store, parents first: a btrfs store receives the streams (`btrfs receive`
   confined to the store's directory creates subvolumes only: nothing a stream says reaches outside it;
   published whole or not at all), a copying store copies (`paths.Tree`: no link followed); each output's
   digest is checked once it is there; parents kept only for others' deltas are deleted at the end;
4. the databases, their records settled (backup_db.settle: what the backup could not hold);
5. the secrets (0600), the configuration, the records and the key; the data directory closed as a hub
   start closes it (data_dir.close).

Afterwards `make up` starts the deployment as it was.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from workspace import data_dir
from workspace.settings import Settings
from workspace.setup import backup_db, deploy
from workspace.setup.backup import fingerprints, inside, sets, write_private
from workspace.setup.backup_sets import MANIFEST, MARKER, BackupError, Item, Manifest, restore_order
from workspace.setup.steps import SetupError, say
from workspace.store import paths
from workspace.store.btrfs_send import held, receive_from_file, renamed_head
from workspace.store.copier import copy_tree, fsync_dir
from workspace.store.homes import PARTIAL, BtrfsHomeStore, HomeStore, HomeStoreError, is_btrfs, store_for

PREFIX = "restore"


def find_set(src: Path, name: str | None = None) -> tuple[Path, Path, Manifest]:
    """(the backup directory, the set's directory, its manifest) that SRC names."""
    src = Path(os.path.abspath(src))
    if (src / MANIFEST).is_file() and name is None:
        root, set_dir = src.parent, src
    elif (src / MARKER).is_file():
        found = sets(src)
        if name is not None:
            found = [s for s in found if s[0] == name]
        if not found:
            raise BackupError(f"{src} holds no {'backup ' + name if name else 'complete backup'}.")
        root, set_dir = src, src / found[-1][0]
    else:
        raise BackupError(f"{src} is not a backup (no {MARKER} nor {MANIFEST} in it); give a backup's directory.")
    if not (root / MARKER).is_file():
        raise BackupError(f"{set_dir} is not inside a backup directory (no {MARKER} beside it).")
    return root, set_dir, Manifest.from_json((set_dir / MANIFEST).read_text(), str(set_dir / MANIFEST))


def damaged(path: Path, why: str = "does not match its manifest (changed or cut short)") -> BackupError:
    return BackupError(f"The backup is damaged: {path} {why}; restore from another backup.")


def verify(root: Path, set_dir: Path, manifest: Manifest) -> int:
    """Check every file the set names against its manifest, before anything is written; the bytes read."""
    started, size = time.monotonic(), 0
    for item in manifest.items:
        path = root / item.path
        if item.form == "stream":
            if not path.is_file() or path.is_symlink():
                raise damaged(path, "is missing")
            if backup_db.sha256_of(path) != item.sha256:
                raise damaged(path)
            _check_head(path, item.key)
            size += path.stat().st_size
        else:
            _check_tree(path, item.digest)
    for entry in manifest.databases.values():
        path = set_dir / entry["file"]
        if not path.is_file() or path.is_symlink() or backup_db.sha256_of(path) != entry["sha256"]:
            raise damaged(path)
        size += path.stat().st_size
    for entry in manifest.files:
        path = set_dir / entry["path"]
        if entry["kind"] == "file":
            if not path.is_file() or path.is_symlink() or backup_db.sha256_of(path) != entry["digest"]:
                raise damaged(path)
        else:
            _check_tree(path, entry["digest"])
    say(
        PREFIX,
        f"checked {len(manifest.items)} outputs, {len(manifest.databases)} databases and {len(manifest.files)} "
        f"files against the manifest: {size / 1e6:,.1f} MB of streams and databases in "
        f"{time.monotonic() - started:.1f} s",
    )
    return size


def _check_head(path: Path, key: str) -> None:
    """The stream's first command must make the subvolume its manifest entry names (a manifest rewritten to
    match another stream is refused here, before anything is received)."""
    with open(path, "rb") as f:
        try:
            head = renamed_head(f.fileno(), key)
        except HomeStoreError as e:
            raise damaged(path, f"is not the stream of {key} ({e})") from None
    if head is None:
        raise damaged(path, "is not a btrfs send stream")


def _check_tree(path: Path, digest: str) -> None:
    try:
        found = paths.digest(path)
    except (FileNotFoundError, NotADirectoryError, paths.Escape):
        raise damaged(path, "is missing") from None
    if found != digest:
        raise damaged(path)


# -- the target -------------------------------------------------------------------------------------


def check_key(manifest: Manifest, key: Path | None, settings: Settings) -> bytes | None:
    """The key file's content to install (None: the backup needs none, or this machine's is the right one)."""
    if not manifest.key_fingerprints:
        return None
    wanted = set(manifest.key_fingerprints)
    here = Path(settings.secret_key_file)
    if key is None:
        if here.is_file() and wanted <= set(fingerprints(here)):
            return None
        raise BackupError(
            "This backup's database holds secrets sealed with a key kept apart from it "
            f"(fingerprint {manifest.key_fingerprints[0][:12]}); give its copy with --key FILE "
            "(the one `backup --key-dest` wrote)."
        )
    if not Path(key).is_file():
        raise BackupError(f"The key file {key} does not exist.")
    if not wanted <= set(fingerprints(Path(key))):
        raise BackupError(
            f"{key} is not the key this backup's secrets are sealed with "
            f"(fingerprint {manifest.key_fingerprints[0][:12]}); give the one `backup --key-dest` wrote."
        )
    return Path(key).read_bytes()


def _empty(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def check_target(settings: Settings, root: Path, manifest: Manifest, force: bool) -> None:
    """Refuse, before anything is written, a target that is not an empty machine (unless `force`)."""
    if inside(Path(settings.data_dir).resolve(), root.resolve()) or inside(root.resolve(), settings.data_dir):
        raise BackupError(f"The backup {root} and the data directory {settings.data_dir} overlap; keep them apart.")
    if not force:
        if not _empty(settings.data_dir):
            raise BackupError(
                f"The data directory {settings.data_dir} is not empty; restore onto an empty machine "
                "(or set WORKSPACE_DATA_DIR to a new directory), or --force to restore into it."
            )
        store = Path(settings.store_dir)
        if any(not _empty(store / area) for area in ("snapshots", "datasets")):
            raise BackupError(f"The home store {store} holds outputs already; give an empty one, or --force.")
    backup_db.check_target(manifest.databases["workspace"], settings.db_url, force, "workspace")
    backup_db.check_target(manifest.databases["hub"], settings.hub_db_url, force, "JupyterHub")


def target_store(settings: Settings, kind: str) -> HomeStore:
    """The home store of this machine, of the backup's kind (a btrfs one mounted as `make up` does)."""
    if kind == "btrfs":
        try:
            deploy.ensure_store(settings, PREFIX)
        except SetupError as e:
            raise BackupError(str(e)) from e
        if not is_btrfs(settings.store_dir):
            raise BackupError(
                f"This backup's outputs are btrfs streams and the home store {settings.store_dir} is not on "
                "btrfs; restore as root with btrfs-progs (a btrfs image is mounted there, as `make up` does)."
            )
    elif is_btrfs(settings.store_dir):
        raise BackupError(
            f"This backup's outputs are plain copies and the home store {settings.store_dir} is on btrfs, which "
            "keeps outputs as subvolumes; set WORKSPACE_STORE_DIR to a directory on another filesystem."
        )
    Path(settings.store_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    return store_for(settings.store_dir, backend=kind)


# -- the outputs ------------------------------------------------------------------------------------


def receive(store: HomeStore, root: Path, manifest: Manifest) -> tuple[int, int]:
    """Put every item of the set into `store`, parents first, each checked; (items restored, bytes read)."""
    started, last, size, made = time.monotonic(), time.monotonic(), 0, []
    ordered = restore_order(manifest.items)
    for n, item in enumerate(ordered, 1):
        if _holds(store, item):
            continue
        size += _put(store, root, item)
        made.append(item)
        target = Path(store.root) / item.area / item.key
        if paths.digest(target) != item.digest:
            _delete(store, item)
            raise damaged(root / item.path, f"restored {item.key} with another content than it had")
        if time.monotonic() - last >= 2 or n == len(ordered):
            last = time.monotonic()
            say(
                PREFIX,
                f"outputs: {n} of {len(ordered)} restored and checked, {size / 1e6:,.1f} MB read, "
                f"{size / 1e6 / max(last - started, 1e-6):,.1f} MB/s",
            )
    for item in made:
        if not item.kept:  # a parent of others' deltas, deleted in the deployment before the backup
            _delete(store, item)
    return len(made), size


def _holds(store: HomeStore, item: Item) -> bool:
    """Whether the store has this item already (a --force restore onto a deployment that has it)."""
    path = Path(store.root) / item.area / item.key
    if item.form == "stream" and isinstance(store, BtrfsHomeStore):
        return held(store, path, item.identity)
    if not path.exists():
        return False
    if paths.digest(path) != item.digest:
        raise BackupError(
            f"The store holds another {item.area[:-1]} named {item.key}; remove it, or use an empty store."
        )
    return True


def _put(store: HomeStore, root: Path, item: Item) -> int:
    area = Path(store.root) / item.area
    source = root / item.path
    if item.form == "stream":
        if not isinstance(store, BtrfsHomeStore):
            raise BackupError(f"{item.key} is a btrfs stream and the home store {store.root} is not on btrfs.")
        return receive_from_file(store, area, item.key, item.identity, source)
    partial = area / f"{PARTIAL}{item.key}"
    parent = area / item.parent if item.parent else None
    copied = copy_tree(source, partial, link_from=parent, durable=True)
    os.rename(partial, area / item.key)
    fsync_dir(area)
    return copied.bytes


def _delete(store: HomeStore, item: Item) -> None:
    (store.delete if item.area == "snapshots" else store.delete_dataset)(item.key)


# -- the rest ---------------------------------------------------------------------------------------


def restore_files(settings: Settings, set_dir: Path, manifest: Manifest, key: bytes | None) -> None:
    """The secrets, the configuration and the records into the data directory; the key where it is kept."""
    for entry in manifest.files:
        source, target = set_dir / entry["path"], settings.path(entry["to"])
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if entry["kind"] == "file":
            write_private(target, source.read_bytes())
            continue
        if target.exists():  # --force: the backup's tree replaces it
            shutil.rmtree(target)
        copy_tree(source, target, durable=True)
    if key is not None:
        path = Path(settings.secret_key_file)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(path, key)
    if any(e["to"] == "environment.env" for e in manifest.files):
        say(
            PREFIX,
            f"the deployment ran with the WORKSPACE_* settings in {settings.path('environment.env')}: "
            "set those this machine needs before `make up`",
        )


def restore(
    settings: Settings, src: Path, key: Path | None = None, force: bool = False, name: str | None = None
) -> Manifest:
    """Restore the backup at SRC onto this machine (see the module's text); its manifest."""
    started = time.monotonic()
    root, set_dir, manifest = find_set(src, name)
    say(PREFIX, f"restoring {manifest.name} ({manifest.created}) from {root} into {settings.data_dir}")
    key_bytes = check_key(manifest, key, settings)
    check_target(settings, root, manifest, force)
    verify(root, set_dir, manifest)
    settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        store = target_store(settings, manifest.store)
        count, size = receive(store, root, manifest)
        for which, url in (("workspace", settings.db_url), ("hub", settings.hub_db_url)):
            entry = manifest.databases[which]
            backup_db.restore(entry, set_dir / entry["file"], url, force)
        ended, deleted = backup_db.settle(settings.db_url, manifest.missing, manifest.name)
        restore_files(settings, set_dir, manifest, key_bytes)
        data_dir.close(settings.data_dir)
    except (HomeStoreError, OSError) as e:
        raise BackupError(
            f"Restoring failed ({e}); the data directory {settings.data_dir} is incomplete: free what is "
            "short, then restore again with --force."
        ) from e
    say(
        PREFIX,
        f"restored {len(manifest.outputs)} outputs ({count} received, {size / 1e6:,.1f} MB, every one's digest "
        f"equal to the backup's), the databases ({ended} executions that were running ended, {deleted} outputs "
        f"deleted during the backup), the secrets and the configuration in {time.monotonic() - started:.1f} s. "
        "Start it with `make up`.",
    )
    return manifest
