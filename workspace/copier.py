"""Copying a home tree faithfully, in parallel, with progress.

Used by the portable home store (plain ext4, NFS) for restores, and for saves
with `link_from`: files unchanged since the parent snapshot (same size, mtime,
mode and owner, rsync's quick check) are hard-linked to the parent's copy
instead of copied, so a save writes only what changed. Snapshots are never
written to after they are made, which is what makes sharing inodes safe.

Kept: regular files, directories (also empty), symlinks, fifos, permissions,
owners, mtimes (nanoseconds), hard links inside the tree, and any file name
(paths are bytes throughout, so names with newlines or non-UTF-8 bytes work).
Sockets and device files are skipped (they cannot be restored meaningfully).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Transfer:
    """Statistics of a restore or a save; also the payload of progress reports."""

    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    files_total: int | None = None
    bytes_total: int | None = None
    # files whose data was shared (hard link, reflink, snapshot) instead of copied
    shared_files: int = 0
    _started: float = field(default_factory=time.monotonic, repr=False)

    def tick(self) -> None:
        self.seconds = time.monotonic() - self._started

    @property
    def files_per_s(self) -> float:
        return self.files / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        if not self.bytes_total or not self.seconds or not self.bytes:
            return None
        return max(0.0, (self.bytes_total - self.bytes) / (self.bytes / self.seconds))

    def describe(self) -> str:
        """One line for a progress bar, e.g. `1,200 of 30,000 files, 12.5 of 230.0 MB, ...`."""
        files = f"{self.files:,}" + (f" of {self.files_total:,}" if self.files_total is not None else "")
        mb = f"{self.bytes / 1e6:,.1f}" + (f" of {self.bytes_total / 1e6:,.1f}" if self.bytes_total is not None else "")
        text = f"{files} files, {mb} MB, {self.files_per_s:,.0f} files/s, {self.mb_per_s:,.1f} MB/s"
        eta = self.eta_s
        if eta is not None and self.files != self.files_total:
            text += f", about {eta:,.0f} s left"
        return text

    def as_dict(self) -> dict:
        return {"bytes": self.bytes, "files": self.files, "seconds": round(self.seconds, 3)}


Progress = Callable[[Transfer], None]

# Files are copied in batches so that thread hand-offs do not dominate for
# homes of many small files.
BATCH_FILES = 64
BATCH_BYTES = 8 << 20


@dataclass
class _Entry:
    rel: bytes
    st: os.stat_result


def _join(root: bytes, rel: bytes) -> bytes:
    return root + b"/" + rel if rel else root


def scan(root: bytes) -> list[_Entry]:
    """All entries under root, parents before children (lstat, no symlink following)."""
    entries = [_Entry(b"", os.lstat(root))]
    stack = [b""]
    while stack:
        rel = stack.pop()
        with os.scandir(_join(root, rel)) as it:
            for de in it:
                child = rel + b"/" + de.name if rel else de.name
                st = de.stat(follow_symlinks=False)
                entries.append(_Entry(child, st))
                if stat.S_ISDIR(st.st_mode):
                    stack.append(child)
    return entries


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (
        a.st_size == b.st_size
        and a.st_mtime_ns == b.st_mtime_ns
        and a.st_mode == b.st_mode
        and a.st_uid == b.st_uid
        and a.st_gid == b.st_gid
    )


COPY_CHUNK = 64 << 20


def _copy_data(src: bytes, dst: bytes, st: os.stat_result, durable: bool, copied: Callable[[int], None]) -> None:
    fd_in = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        fd_out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            left = st.st_size
            while left > 0:
                # in-kernel copy; a reflink on filesystems that support it
                n = os.copy_file_range(fd_in, fd_out, min(left, COPY_CHUNK))
                if n == 0:
                    break
                left -= n
                copied(n)
            os.fchown(fd_out, st.st_uid, st.st_gid)
            os.fchmod(fd_out, stat.S_IMODE(st.st_mode))
            os.utime(fd_out, ns=(st.st_atime_ns, st.st_mtime_ns))
            if durable:
                os.fsync(fd_out)
        finally:
            os.close(fd_out)
    finally:
        os.close(fd_in)


def fsync_dir(path: bytes | os.PathLike) -> None:
    """Make a directory's entries durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_tree(
    src: bytes | str,
    dst: bytes | str,
    *,
    link_from: bytes | str | None = None,
    durable: bool = False,
    threads: int = 8,
    progress: Progress | None = None,
    progress_interval: float = 0.5,
) -> Transfer:
    """Copy the tree at `src` to the new directory `dst` (which must not exist).

    With `link_from` (the parent snapshot), unchanged files are hard-linked to
    it instead of copied. With `durable`, every written file and directory is
    fsynced before this returns. Counts in the result are what was copied;
    `shared_files` counts the files linked instead.
    """
    src, dst = os.fsencode(src), os.fsencode(dst)
    link_from = os.fsencode(link_from) if link_from is not None else None
    entries = scan(src)
    total = Transfer(files_total=0, bytes_total=0)

    # Decide for every regular file: copy, link to the parent's copy, or link
    # to an earlier file of this tree (hard links inside the home).
    copies: list[_Entry] = []
    # (existing path, new path): links to the parent's files, then links to
    # earlier files of this tree (whose targets may themselves be parent links)
    parent_links: list[tuple[bytes, bytes]] = []
    tree_links: list[tuple[bytes, bytes]] = []
    first_of_inode: dict[tuple[int, int], bytes] = {}
    for e in entries:
        if not stat.S_ISREG(e.st.st_mode):
            continue
        if e.st.st_nlink > 1:
            key = (e.st.st_dev, e.st.st_ino)
            if key in first_of_inode:
                tree_links.append((_join(dst, first_of_inode[key]), _join(dst, e.rel)))
                continue
            first_of_inode[key] = e.rel
        if link_from is not None:
            try:
                parent = os.lstat(_join(link_from, e.rel))
            except (FileNotFoundError, NotADirectoryError):
                parent = None
            if parent is not None and stat.S_ISREG(parent.st_mode) and _same_file(parent, e.st):
                parent_links.append((_join(link_from, e.rel), _join(dst, e.rel)))
                continue
        copies.append(e)
        total.files_total += 1
        total.bytes_total += e.st.st_size

    # Directories first (parents before children), then the other entries.
    os.mkdir(dst, 0o700)
    dirs = []
    for e in entries:
        path = _join(dst, e.rel)
        mode = e.st.st_mode
        if stat.S_ISDIR(mode):
            if e.rel:
                os.mkdir(path, 0o700)
            dirs.append(e)
        elif stat.S_ISLNK(mode):
            os.symlink(os.readlink(_join(src, e.rel)), path)
            os.lchown(path, e.st.st_uid, e.st.st_gid)
            os.utime(path, ns=(e.st.st_atime_ns, e.st.st_mtime_ns), follow_symlinks=False)
        elif stat.S_ISFIFO(mode):
            os.mkfifo(path, stat.S_IMODE(mode))
            os.chown(path, e.st.st_uid, e.st.st_gid)
            os.utime(path, ns=(e.st.st_atime_ns, e.st.st_mtime_ns))

    lock = threading.Lock()

    def copied(n: int) -> None:
        with lock:
            total.bytes += n

    def copy_batch(batch: list[_Entry]) -> None:
        for e in batch:
            _copy_data(_join(src, e.rel), _join(dst, e.rel), e.st, durable, copied)
            with lock:
                total.files += 1

    batches, batch, size = [], [], 0
    for e in copies:
        batch.append(e)
        size += e.st.st_size
        if len(batch) >= BATCH_FILES or size >= BATCH_BYTES:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)

    if progress is not None:
        progress(total)  # the totals, at once
    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="copier") as pool:
        pending = {pool.submit(copy_batch, b) for b in batches}
        while pending:
            done, pending = wait(pending, timeout=progress_interval, return_when=FIRST_EXCEPTION)
            for f in done:
                if f.exception() is not None:
                    for other in pending:
                        other.cancel()
                    raise f.exception()
            if progress is not None:
                total.tick()
                progress(total)

    # Links come after the copies so that their targets exist.
    for existing, new in parent_links + tree_links:
        os.link(existing, new)
        total.shared_files += 1

    # Directory metadata last, deepest first: creating entries changes mtimes.
    for e in reversed(dirs):
        path = _join(dst, e.rel)
        os.chown(path, e.st.st_uid, e.st.st_gid)
        os.chmod(path, stat.S_IMODE(e.st.st_mode))
        os.utime(path, ns=(e.st.st_atime_ns, e.st.st_mtime_ns))
        if durable:
            fsync_dir(path)
    total.tick()
    if progress is not None:
        progress(total)
    return total
