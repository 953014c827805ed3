"""Uploads of dataset files: staged in resumable chunks, checked, unpacked safely.

An upload lives in `<store>/uploads/<id>/` (on the store's filesystem, so the
finished file moves into the version without a copy): `data` grows by
appended chunks, `meta.json` says what it is for. Nothing is held in memory
but the chunk being written.

Archives (tar, tar.gz/bz2/xz, zip) are unpacked on request in a sandbox
(workspace/uploads/sandbox.py, workspace/uploads/unpacker.py), never by the hub's root
processes. Abandoned uploads (untouched for `UploadPolicy.expire_after`)
are removed by the service, and an upload is refused beyond what the
user's storage quota leaves.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path, PurePosixPath

from traitlets import Float, Int
from traitlets.config import LoggingConfigurable

from workspace import dataset_versions
from workspace.caller import Caller
from workspace.datasets import DatasetRules, writable
from workspace.db import Database
from workspace.errors import UserError
from workspace.i18n import N_
from workspace.limits import quotas

CHUNK_READ = 8 << 20
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class UploadPolicy(LoggingConfigurable):
    """Bounds on uploads, so that no one fills the store with them."""

    expire_after = Float(
        24 * 3600,
        config=True,
        help="""Seconds after its last byte when an unfinished upload is removed
        (WORKSPACE_UPLOAD_EXPIRE_AFTER). A client resumes within that time.""",
    )
    max_pending = Int(
        4,
        config=True,
        help="Unfinished uploads one user may have at once (WORKSPACE_UPLOAD_MAX_PENDING).",
    )


class Upload:
    def __init__(self, root: Path, upload_id: str):
        if not upload_id.isalnum():
            raise UserError(404, "There is no such upload.")
        self.dir = root / upload_id
        self.id = upload_id

    @classmethod
    def create(cls, root: Path, meta: dict) -> "Upload":
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        up = cls(root, uuid.uuid4().hex)
        up.dir.mkdir()
        (up.dir / "data").touch()
        (up.dir / "meta.json").write_text(json.dumps(meta))
        return up

    @property
    def data(self) -> Path:
        return self.dir / "data"

    def meta(self) -> dict:
        try:
            return json.loads((self.dir / "meta.json").read_text())
        except FileNotFoundError:
            raise UserError(404, "There is no such upload (it may have been finished or cancelled).")

    @property
    def offset(self) -> int:
        return self.data.stat().st_size

    def open_at(self, start: int):
        """The data file opened for appending at `start`, which must be where the upload stands."""
        offset = self.offset
        if start != offset:
            raise UserError(
                409,
                "This chunk starts at byte {start:,} but the upload has {offset:,} bytes; resume from byte {offset:,}.",
                start=start,
                offset=offset,
            )
        return open(self.data, "ab")

    def sha256(self) -> str:
        h = hashlib.sha256()
        with open(self.data, "rb") as f:
            while block := f.read(CHUNK_READ):
                h.update(block)
        return h.hexdigest()

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def touched(self) -> float:
        """When a byte last arrived (or it was created)."""
        return max(self.data.stat().st_mtime, (self.dir / "meta.json").stat().st_mtime)


def pending(root: Path, user: str | None = None):
    """The unfinished uploads (of `user`, or everyone's), as (Upload, meta)."""
    if not root.is_dir():
        return
    for d in root.iterdir():
        if not d.name.isalnum():
            continue
        up = Upload(root, d.name)
        try:
            meta = up.meta()
        except (UserError, ValueError, OSError):
            continue
        if user is None or meta.get("user") == user:
            yield up, meta


def expire(root: Path, max_age: float, now: float | None = None) -> int:
    """Remove the uploads nobody touched for `max_age` seconds; how many went."""
    now = time.time() if now is None else now
    gone = 0
    for up, _ in list(pending(root)):
        try:
            if now - up.touched > max_age:
                up.discard()
                gone += 1
        except FileNotFoundError:  # finished meanwhile
            continue
    return gone


def archive_kind(filename: str) -> str | None:
    name = filename.lower()
    if name.endswith(".zip"):
        return "zip"
    if name.endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")):
        return "tar"
    return None


def place(
    upload: Upload,
    target: Path,
    filename: str,
    unpack_archive: bool,
    label: str,
    sandbox=None,
    room: tuple[int, int] | None = None,
) -> None:
    """Fill the new version directory `target` from a finished upload (moves, never copies the file).

    An archive is unpacked by `sandbox` (workspace/uploads/sandbox.py: unprivileged,
    only the archive and `target` visible), at most `room` = (bytes, files).
    """
    kind = archive_kind(filename) if unpack_archive else None
    if unpack_archive and kind is None:
        raise UserError(400, "{filename} is not an archive this server unpacks (tar, tar.gz, zip).", filename=filename)
    if kind:
        max_bytes, max_files = room or (1 << 62, 1 << 31)
        sandbox.unpack(upload.data, kind, target, label, max_bytes, max_files)
        return
    else:
        name = PurePosixPath(filename).name
        if not name or name in (".", ".."):
            raise UserError(400, "“{filename}” is not a file name.", filename=filename)
        target.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(upload.data, target / name)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            # another btrfs subvolume: a reflink clone shares the blocks instead of copying them
            subprocess.run(["cp", "--reflink=auto", str(upload.data), str(target / name)], check=True)
            upload.data.unlink()
    os.chmod(target, 0o755)
    os.chmod(target / name, 0o644)


# -- an upload's life: begun, checked, made a version ------------------------------------------


def check_uploader(meta: dict, owner: str, name: str, caller: Caller) -> None:
    """An upload is its uploader's (and administrators'), for the one dataset it was begun for; to anyone
    else it does not exist (404)."""
    if (meta["owner"], meta["name"]) != (owner, name) or (meta["user"] != caller.name and not caller.admin):
        raise UserError(404, "There is no such upload.")


def find(root: Path, owner: str, name: str, upload_id: str, caller: Caller) -> Upload:
    """The upload `upload_id` of dataset owner/name, if `caller` may see it; a 404 otherwise."""
    up = Upload(root, upload_id)
    check_uploader(up.meta(), owner, name, caller)
    return up


def reserved(root: Path, user: str, but: str | None = None) -> tuple[int, int]:
    """(bytes announced, count) of the user's unfinished uploads, but one."""
    ups = [meta for up, meta in pending(root, user) if up.id != but]
    return sum(int(m.get("size") or 0) for m in ups), len(ups)


def begin(
    db: Database,
    store,
    owner: str,
    name: str,
    data: dict,
    caller: Caller,
    *,
    quota: quotas.StorageQuota,
    max_pending: int,
) -> Upload:
    """Begin an upload into a new version of owner/name: `data` is {"filename", "size", "sha256"?,
    "unpack"?}; the user's 400, 403/404 (not theirs to change), 429 or 413 (blocking)."""
    filename, size, digest = data.get("filename"), data.get("size"), data.get("sha256")
    if not isinstance(filename, str) or not filename.strip() or "/" in filename:
        raise UserError(400, "Give the file's name (without folders) as “filename”.")
    if not isinstance(size, int) or size < 0:
        raise UserError(400, "Give the file's size in bytes as “size”.")
    if digest is not None and (not isinstance(digest, str) or not SHA256.match(digest)):
        raise UserError(400, "“sha256” must be the file's SHA-256 as 64 hexadecimal digits.")
    unpack = bool(data.get("unpack"))
    if unpack and archive_kind(filename) is None:
        raise UserError(400, "{filename} is not an archive this server unpacks (tar, tar.gz, zip).", filename=filename)
    with db.session() as s:
        writable(s, owner, name, caller)
    # the file counts against the quota from its first byte: an upload may
    # not announce more than the quota leaves, less the uploads under way
    held, count = reserved(store.uploads_dir, caller.name)
    if count >= max_pending:
        raise UserError(
            429,
            "You have {count} unfinished uploads; finish or cancel one first (they are "
            "listed on the Datasets page; abandoned ones go after a day).",
            count=count,
        )
    quotas.status(db, store, quota, caller.name, caller.groups).refuse_beyond(
        N_("Uploading {filename}"), size, held, filename=filename
    )
    meta = {
        "owner": owner,
        "name": name,
        "user": caller.name,
        "filename": filename,
        "size": size,
        "sha256": digest,
        "unpack": unpack,
    }
    return Upload.create(store.uploads_dir, meta)


def complete(
    db: Database,
    store,
    owner: str,
    name: str,
    upload_id: str,
    sha256: str | None,
    caller: Caller,
    *,
    rules: DatasetRules,
    sandbox,
    quota: quotas.StorageQuota,
    received=None,
) -> dict:
    """Make a finished upload the next version of owner/name (its size and checksum checked, an archive
    unpacked in `sandbox`, within what the quota leaves); the version (blocking). The upload is gone
    after, whatever the outcome but a 409 for missing bytes."""
    with db.session() as s:
        dataset_id = writable(s, owner, name, caller).id
    up = find(store.uploads_dir, owner, name, upload_id, caller)
    meta = up.meta()
    _check_arrived(up, meta, sha256, received(upload_id, meta["size"]) if received else None)
    label = meta["filename"]
    room = _room(db, store, quota, up, meta, caller.groups, label)

    def fill(target: Path) -> None:
        place(up, target, meta["filename"], meta["unpack"], label, sandbox, room)

    def build(key, check):
        store.dataset_from_files(key, fill, check)

    try:
        version = dataset_versions.make(db, store, rules, dataset_id, build, "upload", label, caller.name)
    finally:
        up.discard()
    quotas.measure(db, store, meta["user"])
    return version


def _check_arrived(up, meta: dict, sha256: str | None, received: str | None = None) -> None:
    """That the upload has all its bytes (a 409) and, where a checksum is given, the right ones (a 400:
    the upload is discarded). `received`: their SHA-256 kept while they were written (uploads/receiving.py),
    else the file is read again."""
    if up.offset != meta["size"]:
        raise UserError(
            409,
            "The upload has {received:,} of {size:,} bytes; send the rest from byte {received:,} first.",
            received=up.offset,
            size=meta["size"],
        )
    expected = sha256 or meta.get("sha256")
    if expected:
        actual = received or up.sha256()
        if actual != expected.lower():
            up.discard()
            raise UserError(
                400,
                "{filename} arrived damaged (its SHA-256 is {actual}, not {expected}); "
                "the upload was discarded, please upload it again.",
                filename=meta["filename"],
                actual=actual,
                expected=expected,
            )


def _room(db: Database, store, quota: quotas.StorageQuota, up, meta: dict, groups: set[str], label: str) -> tuple:
    """(bytes, files) the version may take: what the uploader's quota leaves now, less the uploads they
    have under way (a 413 where a plain file does not fit)."""
    # what the uploader's quota leaves now bounds the unpacked size and file count (the groups are the
    # caller's: the uploader, or an administrator finishing their upload)
    status = quotas.status(db, store, quota, meta["user"], groups)
    held, _ = reserved(store.uploads_dir, meta["user"], but=up.id)
    # a plain file's size is known; an archive's expansion is bounded by the room returned
    status.refuse_beyond(N_("The version from {label}"), 0 if meta["unpack"] else meta["size"], held, label=label)
    left, files_left = status.room(held)
    return (left if left is not None else 1 << 62, files_left if files_left is not None else 1 << 31)
