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

The source and the parent snapshot are users' trees: they are read through
`paths.Tree` only, so a link (or a directory swapped for one) never leads a
copy, a link to the parent's file or a measurement outside them.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from concurrent.futures import FIRST_COMPLETED, FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable

from workspace import i18n
from workspace.i18n import N_
from workspace.store.paths import Entry, Escape, Tree


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

    def describe(self, locale: str = i18n.DEFAULT) -> str:
        """One line for a progress bar, e.g. `1,200 of 30,000 files, 12.5 of 230.0 MB, ...`, in `locale`."""
        eta = self.eta_s
        figures = dict(
            files=self.files,
            files_total=self.files_total,
            mb=self.bytes / 1e6,
            mb_total=self.bytes_total / 1e6 if self.bytes_total is not None else None,
            files_per_s=self.files_per_s,
            mb_per_s=self.mb_per_s,
            eta=eta,
        )
        if self.files == self.files_total:
            eta = None  # done: nothing left to wait for
        if self.files_total is not None and self.bytes_total is not None and eta is not None:
            text = N_(
                "{files:,} of {files_total:,} files, {mb:,.1f} of {mb_total:,.1f} MB, {files_per_s:,.0f} files/s, "
                "{mb_per_s:,.1f} MB/s, about {eta:,.0f} s left"
            )
        elif self.files_total is not None and self.bytes_total is not None:
            text = N_(
                "{files:,} of {files_total:,} files, {mb:,.1f} of {mb_total:,.1f} MB, {files_per_s:,.0f} files/s, "
                "{mb_per_s:,.1f} MB/s"
            )
        elif self.files_total is not None:
            text = N_(
                "{files:,} of {files_total:,} files, {mb:,.1f} MB, {files_per_s:,.0f} files/s, {mb_per_s:,.1f} MB/s"
            )
        elif self.bytes_total is not None and eta is not None:
            text = N_(
                "{files:,} files, {mb:,.1f} of {mb_total:,.1f} MB, {files_per_s:,.0f} files/s, {mb_per_s:,.1f} MB/s, "
                "about {eta:,.0f} s left"
            )
        elif self.bytes_total is not None:
            text = N_(
                "{files:,} files, {mb:,.1f} of {mb_total:,.1f} MB, {files_per_s:,.0f} files/s, {mb_per_s:,.1f} MB/s"
            )
        else:
            text = N_("{files:,} files, {mb:,.1f} MB, {files_per_s:,.0f} files/s, {mb_per_s:,.1f} MB/s")
        return i18n.translate(locale, text, **figures)

    def as_dict(self) -> dict:
        return {"bytes": self.bytes, "files": self.files, "seconds": round(self.seconds, 3)}


Progress = Callable[[Transfer], None]

# Files are copied in batches so that thread hand-offs do not dominate for
# homes of many small files.
BATCH_FILES = 64
BATCH_BYTES = 8 << 20
# batches queued ahead of the copying threads while the walk goes on
PENDING_PER_THREAD = 64  # about 4,000 files ahead per thread, a few MB


def _join(root: bytes, rel: bytes) -> bytes:
    return root + b"/" + rel if rel else root


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (
        a.st_size == b.st_size
        and a.st_mtime_ns == b.st_mtime_ns
        and a.st_mode == b.st_mode
        and a.st_uid == b.st_uid
        and a.st_gid == b.st_gid
    )


COPY_CHUNK = 64 << 20


def _copy_data(
    src: Tree, rel: bytes, dst: bytes, st: os.stat_result, durable: bool, copied: Callable[[int], None]
) -> bool:
    """Copy one file's data into the new file `dst`; False if it is no longer a regular file."""
    try:
        # O_NONBLOCK: a file swapped for a fifo must not hang the copy
        fd_in = src.open(rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (FileNotFoundError, Escape):
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd_in).st_mode):
            return False
        fd_out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
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
    return True


def fsync_dir(path: bytes | os.PathLike) -> None:
    """Make a directory's entries durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parent_copy(parent: Tree | None, e: Entry) -> bool:
    """True if the parent snapshot has this very file at the same place (rsync's quick check)."""
    if parent is None:
        return False
    try:
        st = parent.lstat(e.rel)
    except (FileNotFoundError, NotADirectoryError, Escape):
        return False
    return stat.S_ISREG(st.st_mode) and _same_file(st, e.st)


# Large files are copied first (the longest tasks start at once, beside the small ones),
# whatever the walk's order; at most this many are remembered for it.
EARLY_FILES = 1024


def first_walk(src: bytes | str, link_from: bytes | str | None = None) -> tuple[Transfer, list, list]:
    """What a copy of `src` will copy (files and bytes not shared with `link_from`), its large files
    as (rel, stat) and its directories as (rel, metadata), parents first, by a first walk."""
    total = Transfer(files_total=0, bytes_total=0)
    early, dirs = [], []
    with Tree(src) as tree, _maybe_tree(link_from) as parent:
        for e in tree.walk():
            if e.is_dir():
                dirs.append((e.rel, _meta(e.st)))
            elif e.is_file() and not _parent_copy(parent, e):
                total.files_total += 1
                total.bytes_total += e.st.st_size
                if e.st.st_size >= BATCH_BYTES and e.st.st_nlink == 1 and len(early) < EARLY_FILES:
                    early.append((e.rel, e.st))
    return total, early, dirs


class _maybe_tree:
    def __init__(self, root):
        try:
            self.tree = Tree(root) if root is not None else None
        except (FileNotFoundError, NotADirectoryError):
            self.tree = None

    def __enter__(self) -> Tree | None:
        return self.tree

    def __exit__(self, *exc) -> None:
        if self.tree is not None:
            self.tree.close()


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

    `src` and `link_from` are users' trees: they are read only through
    `paths.Tree` (no link is followed, none leads out). With `link_from` (the
    parent snapshot), unchanged files are hard-linked to it instead of
    copied. With `durable`, every written file and directory is fsynced
    before this returns. Counts in the result are what was copied;
    `shared_files` counts the files linked instead. Entries are streamed: a
    first walk counts the totals (so a progress bar has an end) and finds the
    large files, which start first; the second walk copies the rest. Memory
    grows with the directories (their metadata is set last), the large and
    the multiply-linked files, not with the files.
    """
    src, dst = os.fsencode(src), os.fsencode(dst)
    link_from = os.fsencode(link_from) if link_from is not None else None
    total, early, dirs = first_walk(src, link_from)
    if progress is not None:
        progress(total)  # the totals, at once
    with (
        Tree(src) as tree,
        _maybe_tree(link_from) as parent,
        ThreadPoolExecutor(max(1, threads), thread_name_prefix="copier") as pool,
    ):
        copy = _Copy(tree, parent, dst, pool, total, dirs, durable, threads, progress, progress_interval)
        copy.make_dirs()
        copy.start_early(early)
        for e in tree.walk():
            copy.entry(e)
        copy.finish()
        root_meta = _meta(os.fstat(tree.fd))
    _set_dir_meta(dst, root_meta, durable)
    total.tick()
    if progress is not None:
        progress(total)
    return total


class _Copy:
    """One `copy_tree` under way: the second walk's entries made in `dst`, the regular files' data copied
    by the pool in batches, the tree's own hard links and the directories' metadata set once all exists."""

    def __init__(
        self,
        tree: Tree,
        parent: Tree | None,
        dst: bytes,
        pool: ThreadPoolExecutor,
        total: Transfer,
        dirs: list,
        durable: bool,
        threads: int,
        progress: Progress | None,
        interval: float,
    ):
        self.tree, self.parent, self.dst, self.pool, self.total = tree, parent, dst, pool, total
        self.dirs = dirs  # (rel, metadata), parents first: their metadata is set last
        self.durable, self.threads, self.progress, self.interval = durable, threads, progress, interval
        self.lock = threading.Lock()
        self.pending: set = set()
        self.last_report = time.monotonic()
        self.batch: list[tuple[bytes, os.stat_result]] = []
        self.size = 0
        self.first_of_inode: dict[tuple[int, int], bytes] = {}  # hard links inside the tree
        self.tree_links: list[tuple[bytes, bytes]] = []  # (first copy, another name of it)
        self.started_early: set[bytes] = set()

    def copied(self, n: int) -> None:
        with self.lock:
            self.total.bytes += n

    def copy_batch(self, batch: list[tuple[bytes, os.stat_result]]) -> None:
        for rel, st in batch:
            if _copy_data(self.tree, rel, _join(self.dst, rel), st, self.durable, self.copied):
                with self.lock:
                    self.total.files += 1

    def settle(self, block: bool) -> None:
        """Wait while more batches are queued than the walk may run ahead of (`block`: until all are done);
        a batch's error is raised (the others cancelled), and progress told every interval meanwhile."""
        while self.pending:
            limit = self.threads * PENDING_PER_THREAD if not block else 0
            if len(self.pending) <= limit:
                break
            # while walking, wait only until a batch is done (the walk goes on); at the end, for all
            done, self.pending = wait(
                self.pending, timeout=self.interval, return_when=FIRST_EXCEPTION if block else FIRST_COMPLETED
            )
            for f in done:
                if f.exception() is not None:
                    for other in self.pending:
                        other.cancel()
                    raise f.exception()
            if self.progress is not None and time.monotonic() - self.last_report >= self.interval:
                self.total.tick()
                self.progress(self.total)
                self.last_report = time.monotonic()

    def make_dirs(self) -> None:
        # The directories first (as found by the first walk); their metadata last, once everything
        # inside exists (creating entries changes a directory's mtime). Only directories are kept.
        os.mkdir(self.dst, 0o700)
        for rel, _ in self.dirs:
            os.mkdir(_join(self.dst, rel), 0o700)

    def start_early(self, early: list[tuple[bytes, os.stat_result]]) -> None:
        for rel, st in early:  # the large files first, each a task of its own
            self.pending.add(self.pool.submit(self.copy_batch, [(rel, st)]))
        self.started_early = {rel for rel, _ in early}

    def entry(self, e: Entry) -> None:
        """Make the walk's entry `e` in the copy (a regular file's data is queued for the pool)."""
        path = _join(self.dst, e.rel)
        mode = e.st.st_mode
        if stat.S_ISDIR(mode):
            try:  # made above, unless it is new since the first walk
                os.mkdir(path, 0o700)
                self.dirs.append((e.rel, _meta(e.st)))
            except FileExistsError:
                pass
        elif stat.S_ISLNK(mode):
            os.symlink(self.tree.readlink(e.rel), path)
            os.lchown(path, e.st.st_uid, e.st.st_gid)
            os.utime(path, ns=(e.st.st_atime_ns, e.st.st_mtime_ns), follow_symlinks=False)
        elif stat.S_ISFIFO(mode):
            os.mkfifo(path, 0o600)
            os.chown(path, e.st.st_uid, e.st.st_gid, follow_symlinks=False)
            os.chmod(path, stat.S_IMODE(mode))  # its own mode, whatever the umask (the hub's is 077): made here
            os.utime(path, ns=(e.st.st_atime_ns, e.st.st_mtime_ns), follow_symlinks=False)
        elif stat.S_ISREG(mode) and e.rel not in self.started_early:
            self._regular_file(e, path)
        # sockets and devices are skipped

    def _regular_file(self, e: Entry, path: bytes) -> None:
        """Another name of a file copied already, a link to the parent's copy, or into a batch to copy."""
        if e.st.st_nlink > 1:
            key = (e.st.st_dev, e.st.st_ino)
            if key in self.first_of_inode:
                self.tree_links.append((_join(self.dst, self.first_of_inode[key]), path))
                return
            self.first_of_inode[key] = e.rel
        if _parent_copy(self.parent, e):
            self.parent.link(e.rel, path)
            self.total.shared_files += 1
            return
        self.batch.append((e.rel, e.st))
        self.size += e.st.st_size
        if len(self.batch) >= BATCH_FILES or self.size >= BATCH_BYTES:
            self.pending.add(self.pool.submit(self.copy_batch, self.batch))
            self.batch, self.size = [], 0
            self.settle(block=False)

    def finish(self) -> None:
        """Wait for the data, then link the tree's other names and set the directories' metadata."""
        if self.batch:
            self.pending.add(self.pool.submit(self.copy_batch, self.batch))
        self.settle(block=True)
        # tree links last: their targets (copied by the workers) exist now
        for existing, new in self.tree_links:
            os.link(existing, new, follow_symlinks=False)
            self.total.shared_files += 1
        for rel, meta in reversed(self.dirs):  # deepest first
            _set_dir_meta(_join(self.dst, rel), meta, self.durable)


def _meta(st: os.stat_result) -> tuple:
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), st.st_atime_ns, st.st_mtime_ns


def _set_dir_meta(path: bytes, meta: tuple, durable: bool) -> None:
    uid, gid, mode, atime, mtime = meta
    os.chown(path, uid, gid, follow_symlinks=False)
    os.chmod(path, mode)  # a directory this copy made, not a link
    os.utime(path, ns=(atime, mtime), follow_symlinks=False)
    if durable:
        fsync_dir(path)
