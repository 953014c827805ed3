"""Uploads of dataset files: staged in resumable chunks, checked, unpacked safely.

An upload lives in `<store>/uploads/<id>/` (on the store's filesystem, so the
finished file moves into the version without a copy): `data` grows by
appended chunks, `meta.json` says what it is for. Nothing is held in memory
but the chunk being written.

Archives (tar, tar.gz/bz2/xz, zip) are unpacked on request, refusing any
member that would land outside the version: absolute paths, `..`, links
pointing outside, devices and fifos.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tarfile
import uuid
import zipfile
from pathlib import Path, PurePosixPath

from .errors import UserError

CHUNK_READ = 8 << 20


class Upload:
    def __init__(self, root: Path, upload_id: str):
        if not upload_id.isalnum():
            raise UserError(404, "There is no such upload.")
        self.dir = root / upload_id
        self.id = upload_id

    @classmethod
    def create(cls, root: Path, meta: dict) -> "Upload":
        root.mkdir(parents=True, exist_ok=True)
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
                409, f"This chunk starts at byte {start:,} but the upload has {offset:,} bytes; "
                     f"resume from byte {offset:,}."
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


def archive_kind(filename: str) -> str | None:
    name = filename.lower()
    if name.endswith(".zip"):
        return "zip"
    if name.endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")):
        return "tar"
    return None


def _safe_member(name: str, label: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise UserError(400, f"{label} is refused: its entry “{name}” would be written outside the dataset.")
    return path


def _inside(base: PurePosixPath, target: str) -> bool:
    if target.startswith("/"):
        return False
    depth = 0
    for part in (base.parent / target).parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return True


def unpack(archive: Path, kind: str, target: Path, label: str) -> None:
    """Unpack into the new directory `target`, refusing members that escape it (before writing any)."""
    target.mkdir(parents=True, exist_ok=True)
    if kind == "zip":
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                _safe_member(info.filename, label)
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    raise UserError(400, f"{label} is refused: it contains a link (“{info.filename}”).")
            z.extractall(target)
        return
    try:
        tar = tarfile.open(archive)
    except tarfile.TarError:
        raise UserError(400, f"{label} is not a readable tar archive.")
    with tar:
        members = tar.getmembers()
        for m in members:
            path = _safe_member(m.name, label)
            if m.issym() or m.islnk():
                # a symlink is relative to its directory, a hard link to the archive's root
                if not _inside(path if m.issym() else PurePosixPath("_"), m.linkname):
                    raise UserError(
                        400, f"{label} is refused: its link “{m.name}” points outside the dataset."
                    )
            elif not (m.isfile() or m.isdir()):
                raise UserError(400, f"{label} is refused: “{m.name}” is a device or pipe, not a file.")
        # the checks above run first; the "data" filter of Python's tarfile checks again
        tar.extractall(target, members=members, filter="data")


def place(upload: Upload, target: Path, filename: str, unpack_archive: bool, label: str) -> None:
    """Fill the new version directory `target` from a finished upload (moves, never copies the file)."""
    kind = archive_kind(filename) if unpack_archive else None
    if unpack_archive and kind is None:
        raise UserError(400, f"{filename} is not an archive this server unpacks (tar, tar.gz, zip).")
    if kind:
        unpack(upload.data, kind, target, label)
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
    for p in [target, *target.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
