"""The one place that opens paths inside users' trees, and never leaves them.

A student controls everything in their home: links (symbolic and hard),
names, depth, and (while their container runs) the tree changing under a
walk. Hub-side code that reads a home, an output, a dataset version or an
upload (saves and restores of the copying store, measurements, quota walks,
tree checks, making a dataset from a directory of an output) goes through a
`Tree`, which resolves every path *beneath* its root:

- `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
  RESOLVE_NO_MAGICLINKS` where the kernel has it (Linux 5.6+): one system
  call, and no component, the last included, may be a link;
- elsewhere (an older kernel, a seccomp profile without it) a walk one
  component at a time, each opened with `O_NOFOLLOW` relative to its parent's
  descriptor.

Either way a link, `..`, an absolute path or a component swapped for a link
mid-walk makes the call fail with `Escape` (an `OSError`, errno ELOOP or
EXDEV), never reach a file outside. Walks (`Tree.walk`) stream entries
depth-first, holding one open directory per level and nothing else, so a
home of millions of files costs no memory in the hub.

Links themselves are data: a walk reports them (lstat) and `readlink` reads
their text; nothing here follows one.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Iterator

_RESOLVE_NO_XDEV = 0x01
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on x86_64 and aarch64 (the unified syscall table)

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Escape(OSError):
    """A path inside a user's tree would leave it (a link, `..`, an absolute path)."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = None
_openat2_works: bool | None = None


def _openat2(dir_fd: int, rel: bytes, flags: int, mode: int) -> int:
    how = _OpenHow(
        flags | os.O_CLOEXEC,
        mode if flags & os.O_CREAT else 0,
        _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS,
    )
    fd = _libc.syscall(_SYS_OPENAT2, dir_fd, rel, ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), os.fsdecode(rel))
    return fd


def _has_openat2() -> bool:
    global _libc, _openat2_works
    if _openat2_works is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.syscall.restype = ctypes.c_long
            root = os.open("/", DIR_FLAGS)
            try:
                os.close(_openat2(root, b".", DIR_FLAGS, 0))
            finally:
                os.close(root)
            _openat2_works = True
        except (OSError, AttributeError):
            _openat2_works = False
    return _openat2_works


def split(rel: str | bytes) -> list[bytes]:
    """The components of a relative path; `..`, absolute paths and NUL are an `Escape`."""
    rel = os.fsencode(rel)
    if rel.startswith(b"/") or b"\0" in rel:
        raise Escape(errno.EXDEV, "an absolute path is not inside the tree", os.fsdecode(rel))
    parts = [p for p in rel.split(b"/") if p and p != b"."]
    if b".." in parts:
        raise Escape(errno.EXDEV, "'..' is not inside the tree", os.fsdecode(rel))
    return parts


@dataclass
class Entry:
    """One entry of a walk: its path relative to the tree's root (bytes) and its lstat."""

    rel: bytes
    st: os.stat_result

    @property
    def name(self) -> bytes:
        return self.rel.rsplit(b"/", 1)[-1]

    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)

    def is_file(self) -> bool:
        return stat.S_ISREG(self.st.st_mode)

    def is_link(self) -> bool:
        return stat.S_ISLNK(self.st.st_mode)


class Tree:
    """A user-controlled directory tree, opened once at its root (which the hub chose).

    Use as a context manager, or call `close()`.
    """

    def __init__(self, root: str | bytes | os.PathLike):
        self.root = os.fsencode(root)
        own = f"/proc/{os.getpid()}/fd/".encode()
        if self.root.startswith(own) and self.root[len(own) :].isdigit():
            # a directory this process resolved already (`proc_path`): the same one, not a new lookup
            self.fd = os.dup(int(self.root[len(own) :]))
            if not stat.S_ISDIR(os.fstat(self.fd).st_mode):
                os.close(self.fd)
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", os.fsdecode(self.root))
            return
        # the root itself is the hub's path (store/snapshots/KEY): its last
        # component must still not be a link a user planted
        self.fd = os.open(self.root, DIR_FLAGS)

    def __enter__(self) -> "Tree":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    # -- opening --------------------------------------------------------------------

    def open(self, rel: str | bytes, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
        """A descriptor for `rel` beneath the root; no component may be a link."""
        parts = split(rel)
        if not parts:  # the root itself, as a directory
            return os.open(".", DIR_FLAGS, dir_fd=self.fd)
        if _has_openat2():
            try:
                return _openat2(self.fd, b"/".join(parts), flags, mode)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.EXDEV):
                    raise Escape(e.errno, "the path leads through a link", os.fsdecode(rel)) from None
                raise
        return self._walk_open(parts, flags, mode, rel)

    def _walk_open(self, parts: list[bytes], flags: int, mode: int, rel) -> int:
        fd = self.fd
        try:
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                try:
                    nxt = os.open(part, (flags if last else DIR_FLAGS) | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR) and self._is_link(fd, part):
                        raise Escape(errno.ELOOP, "the path leads through a link", os.fsdecode(rel)) from None
                    raise
                if fd != self.fd:
                    os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            if fd != self.fd:
                os.close(fd)
            raise

    @staticmethod
    def _is_link(dir_fd: int, name: bytes) -> bool:
        try:
            return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            return False

    def opendir(self, rel: str | bytes) -> int:
        return self.open(rel, DIR_FLAGS)

    def _parent(self, rel: str | bytes) -> tuple[int, bytes]:
        parts = split(rel)
        if not parts:
            raise Escape(errno.EINVAL, "the tree's root has no parent here", os.fsdecode(rel))
        return self.opendir(b"/".join(parts[:-1])), parts[-1]

    def lstat(self, rel: str | bytes) -> os.stat_result:
        """The entry's own status (a link is reported as a link, not followed)."""
        if not split(rel):
            return os.fstat(self.fd)
        parent, name = self._parent(rel)
        try:
            return os.stat(name, dir_fd=parent, follow_symlinks=False)
        finally:
            os.close(parent)

    def readlink(self, rel: str | bytes) -> bytes:
        parent, name = self._parent(rel)
        try:
            return os.readlink(name, dir_fd=parent)
        finally:
            os.close(parent)

    def link(self, rel: str | bytes, new: bytes) -> None:
        """Hard-link the file at `rel` (reached through no link, not itself followed) as the path `new`."""
        parent, name = self._parent(rel)
        try:
            os.link(name, new, src_dir_fd=parent, follow_symlinks=False)
        finally:
            os.close(parent)

    def is_dir(self, rel: str | bytes) -> bool:
        """True if `rel` is a real directory beneath the root (reached through no link)."""
        try:
            os.close(self.opendir(rel))
            return True
        except (Escape, FileNotFoundError, NotADirectoryError):
            return False

    def proc_path(self, rel: str | bytes = b"") -> tuple[int, str]:
        """(fd, a /proc path naming it) for a directory beneath the root, for a command run by this process.

        The command sees exactly the directory resolved here, whatever the
        user renames meanwhile. Close the fd once the command is done.
        """
        fd = self.opendir(rel)
        return fd, f"/proc/{os.getpid()}/fd/{fd}"

    # -- walking --------------------------------------------------------------------

    def walk(self, rel: str | bytes = b"", *, max_depth: int = 4096) -> Iterator[Entry]:
        """Every entry beneath `rel` (not `rel` itself), parents before children, streamed.

        Directories are entered through their descriptor with O_NOFOLLOW, so a
        directory replaced by a link between the listing and the descent is an
        `Escape`.
        """
        prefix = b"/".join(split(rel))
        yield from self._walk_dir(self.opendir(prefix), prefix, 0, max_depth)

    def _walk_dir(self, fd: int, prefix: bytes, depth: int, max_depth: int) -> Iterator[Entry]:
        if depth >= max_depth:
            os.close(fd)
            raise Escape(errno.ELOOP, f"the tree is deeper than {max_depth} levels", os.fsdecode(prefix))
        try:
            with os.scandir(fd) as it:
                for de in it:
                    name = os.fsencode(de.name)
                    rel = prefix + b"/" + name if prefix else name
                    try:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:  # removed meanwhile (a running workspace)
                        continue
                    yield Entry(rel, st)
                    if stat.S_ISDIR(st.st_mode):
                        try:
                            child = os.open(name, DIR_FLAGS, dir_fd=fd)
                        except FileNotFoundError:
                            continue
                        except OSError as e:
                            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                                raise Escape(
                                    errno.ELOOP, "a directory became a link during the walk", os.fsdecode(rel)
                                ) from None
                            raise
                        yield from self._walk_dir(child, rel, depth + 1, max_depth)
        finally:
            os.close(fd)


def walk(root: str | bytes | os.PathLike, **kwargs) -> Iterator[Entry]:
    """Every entry beneath `root` (see `Tree.walk`), the root's own stat first with rel b""."""
    with Tree(root) as tree:
        yield Entry(b"", os.fstat(tree.fd))
        yield from tree.walk(**kwargs)


def measure(root: str | bytes | os.PathLike, limit_files: int | None = None) -> tuple[int, int]:
    """(bytes, entries) of a tree: regular files' sizes, each inode once; every non-directory counts.

    Only inodes with more than one link are remembered (to count them once),
    so memory does not grow with the tree. Stops early, returning what it
    counted, once more than `limit_files` entries were seen.
    """
    linked, size, files = set(), 0, 0
    for e in walk(root):
        if not e.rel or e.is_dir():
            continue
        files += 1
        if e.is_file():
            if e.st.st_nlink > 1:
                key = (e.st.st_dev, e.st.st_ino)
                if key in linked:
                    continue
                linked.add(key)
            size += e.st.st_size
        if limit_files is not None and files > limit_files:
            break
    return size, files


DIGEST_CHUNK = 1 << 20
_MOD = 1 << 256


def digest(root: str | bytes | os.PathLike) -> str:
    """A fingerprint of a tree's content (hex): every entry's path, type, mode, owner and mtime, each
    regular file's bytes and each link's text; equal for two trees that hold the same, whatever order
    their directories list entries in (the entries' hashes are summed), and whether or not files are
    hard links of each other. The root's own metadata, sockets and devices are left out (a copy keeps
    none of them). Never follows a link: a backup's check of an output reads the output only."""
    total = 0
    with Tree(root) as tree:
        for e in tree.walk():
            kind = stat.S_IFMT(e.st.st_mode)
            if not (stat.S_ISREG(kind) or stat.S_ISDIR(kind) or stat.S_ISLNK(kind) or stat.S_ISFIFO(kind)):
                continue
            h = hashlib.sha256(
                b"%d %o %d %d %d\0" % (kind, stat.S_IMODE(e.st.st_mode), e.st.st_uid, e.st.st_gid, e.st.st_mtime_ns)
            )
            h.update(e.rel + b"\0")
            if stat.S_ISLNK(kind):
                h.update(tree.readlink(e.rel))
            elif stat.S_ISREG(kind):
                _hash_file(tree, e.rel, h)
            total = (total + int.from_bytes(h.digest(), "big")) % _MOD
    return f"{total:064x}"


def _hash_file(tree: Tree, rel: bytes, h) -> None:
    fd = tree.open(rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Escape(errno.EINVAL, "a file changed while it was read", os.fsdecode(rel))
        while chunk := os.read(fd, DIGEST_CHUNK):
            h.update(chunk)
    finally:
        os.close(fd)


def link_escapes(rel: bytes, target: bytes) -> bool:
    """True if a link at `rel` (relative to a tree's root) with this text points outside the tree."""
    if target.startswith(b"/"):
        return True
    depth = rel.count(b"/")  # the link's directory's depth
    for part in target.split(b"/"):
        if part == b"..":
            depth -= 1
            if depth < 0:
                return True
        elif part and part != b".":
            depth += 1
    return False
