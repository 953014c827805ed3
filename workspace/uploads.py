"""Uploads of dataset files: staged in resumable chunks, checked, unpacked safely.

An upload lives in `<store>/uploads/<id>/` (on the store's filesystem, so the
finished file moves into the version without a copy): `data` grows by
appended chunks, `meta.json` says what it is for. Nothing is held in memory
but the chunk being written.

Archives (tar, tar.gz/bz2/xz, zip) are unpacked on request in a sandbox
(workspace/sandbox.py, workspace/unpacker.py), never by the hub's root
processes. Abandoned uploads (untouched for `UploadPolicy.expire_after`)
are removed by the service, and an upload is refused beyond what the
user's storage quota leaves.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path, PurePosixPath

from traitlets import Float, Int
from traitlets.config import LoggingConfigurable

from .errors import UserError

CHUNK_READ = 8 << 20


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
                f"This chunk starts at byte {start:,} but the upload has {offset:,} bytes; "
                f"resume from byte {offset:,}.",
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

    An archive is unpacked by `sandbox` (workspace/sandbox.py: unprivileged,
    only the archive and `target` visible), at most `room` = (bytes, files).
    """
    kind = archive_kind(filename) if unpack_archive else None
    if unpack_archive and kind is None:
        raise UserError(400, f"{filename} is not an archive this server unpacks (tar, tar.gz, zip).")
    if kind:
        max_bytes, max_files = room or (1 << 62, 1 << 31)
        sandbox.unpack(upload.data, kind, target, label, max_bytes, max_files)
        return
    else:
        name = PurePosixPath(filename).name
        if not name or name in (".", ".."):
            raise UserError(400, f"“{filename}” is not a file name.")
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
