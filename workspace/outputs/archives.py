"""Archives of users' trees, written as a stream: tar.gz and zip, chunk by chunk, never a copy on disk.

An archive is written by one thread into `out(chunk)` (the service hands the chunks to the
response through a bounded queue, so memory stays bounded whatever the tree's size): the writer
holds one chunk of file data and the small headers, nothing more.

What goes in comes from a `paths.Tree` (workspace/store/paths.py), so the student who controls the
tree controls nothing else:

- entries are what a walk that never follows a link finds, each file opened beneath the tree's
  root with no link on the way, non-blocking, and checked to be the very regular file the walk
  saw (a FIFO would hang a thread, a device node would read the host's device);
- a link is data: tar stores it as a link (its target text, never followed), zip has no portable
  link, so it is left out and named in the archive's comment; FIFOs, sockets and device nodes
  are left out (tar and zip alike) and named there too (zip) or only counted (tar);
- permissions keep their rwx bits only (no setuid, setgid or sticky bit reaches whoever unpacks).

Compression (measured on this project's machine, one core): zlib at level 1 compresses text at
78 MB/s and random data at 31 MB/s, level 6 text at 31 MB/s for 10 % less output. ISA-L's deflate
(`isal`, the same format) at level 1 compresses CSV text at 440 MB/s to 36 % (zlib's level 1: 136
MB/s to 38 %, measured side by side, #34), so both formats are deflated by ISA-L (zip: in the place
of the compressor Python's zipfile makes for each file). Level 1, and a file over 64 KiB whose
first 64 KiB do not shrink below 90 % (checkpoints, images, archives) is stored as it is (zip:
ZIP_STORED; tar.gz: stored deflate blocks inside the one gzip stream, written at memory speed), which
keeps a download of a model's weights at the speed of the disk and the network rather than of
deflate. A smaller file is compressed without trying first: trying would cost as much as compressing
it (measured: 2,000 CSV files of 25 kB, 34 MB/s with a trial, 48 MB/s without). In a tar.gz the trial
is the file's own start, compressed into the stream (GzipStream.probe), so a text file is compressed
once, not one and a half times (zip names a file's method before its data, so it still tries aside).
A tar.gz's compressed stretches are deflated on several cores at once (deflate.py).
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import stat
import tarfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from isal import isal_zlib

from workspace.i18n import N_
from workspace.outputs.deflate import LEVEL, PROBE, GzipStream, compressible
from workspace.store import paths

CHUNK = 1 << 20  # what `out` receives at a time, at most (a file's block; gathered small writes)
PASS = CHUNK // 4  # a write at least this large is not gathered (copying it would cost more than a chunk)
FORMATS = ("tar.gz", "zip")
CONTENT_TYPES = {"tar.gz": "application/gzip", "zip": "application/zip"}
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class Cancelled(Exception):
    """Whoever receives the archive is gone; stop writing it."""


class Chunks:
    """Collects small writes (headers, small files) into chunks of up to CHUNK bytes for `out`; a write of
    PASS bytes or more (file data, a compressed piece) passes through as it is. Nothing is copied on
    the way out: a gathered chunk is handed over (a bytearray) and a new one begun."""

    def __init__(self, out: Callable[[bytes], None]):
        self.out = out
        self.buf = bytearray()
        self.count = 0  # bytes written so far (zipfile asks where it is)

    def write(self, data) -> int:
        n = len(data)
        self.count += n
        if n >= PASS:  # what is gathered goes first, then this as it is (no copy)
            self.flush()
            self.out(data if isinstance(data, bytes) else bytes(data))
        else:
            self.buf += data
            if len(self.buf) >= CHUNK:
                self.flush()
        return n

    def flush(self) -> None:
        if self.buf:
            chunk, self.buf = self.buf, bytearray()
            self.out(chunk)


def _encoded(info: tarfile.TarInfo) -> bytes:
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _mode(st: os.stat_result) -> int:
    return stat.S_IMODE(st.st_mode) & 0o777


@dataclass
class Written:
    """What an archive holds so far."""

    files: int = 0
    bytes: int = 0
    links: int = 0
    skipped: list[str] = field(default_factory=list)  # what was left out, and why


class TarGzWriter:
    """A POSIX (pax) tar in one gzip stream."""

    format = "tar.gz"

    def __init__(self, out: Callable[[bytes], None]):
        self.sink = Chunks(out)
        self.gz = GzipStream(self.sink.write)
        self.written = Written()

    def _header(self, info: tarfile.TarInfo) -> None:
        self.gz.plain(False)
        self.gz.write(_encoded(info))

    @staticmethod
    def _info(name: str, st: os.stat_result | None, kind: bytes, size: int = 0) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.size = size
        if st is not None:
            info.mode = _mode(st)
            info.mtime = max(0, int(st.st_mtime))
            info.uid, info.gid = st.st_uid, st.st_gid
        else:
            info.mode, info.mtime = 0o644, int(time.time())
        info.uname = info.gname = ""
        return info

    def directory(self, name: str, st: os.stat_result) -> None:
        self._header(self._info(name + "/", st, tarfile.DIRTYPE))

    def link(self, name: str, st: os.stat_result, target: bytes) -> None:
        info = self._info(name, st, tarfile.SYMTYPE)
        info.linkname = os.fsdecode(target)
        info.mode = 0o777
        self._header(info)
        self.written.links += 1

    def file(self, name: str, st: os.stat_result, blocks: Iterator[bytes]) -> None:
        size = st.st_size
        info = self._info(name, st, tarfile.REGTYPE, size)
        pad = b"\0" * (-size % tarfile.BLOCKSIZE)
        if PROBE < size <= CHUNK:  # read in one block: trial, decision and deflate in the pool (deflate.py)
            self.gz.whole(_encoded(info), b"".join(blocks), pad)
        else:
            self._header(info)
            first = size > PROBE  # (a smaller file is compressed, as its header left the stream)
            for block in blocks:
                if first:
                    # the start compressed, then the rest: compressed or stored as that start did
                    self.gz.plain(not self.gz.probe(memoryview(block)[:PROBE]))
                    block = memoryview(block)[PROBE:]
                    first = False
                self.gz.write(block)
            if pad:
                self.gz.write(pad)
        self.written.files += 1
        self.written.bytes += size

    def data(self, name: str, content: bytes) -> None:
        """A file made here (a manifest)."""
        self.file(name, _made(len(content)), iter([content]) if content else iter(()))

    def skip(self, name: str, why: str) -> None:
        self.written.skipped.append(f"{name}: {why}")

    def close(self) -> None:
        self.gz.plain(False)
        self.gz.write(b"\0" * (2 * tarfile.BLOCKSIZE))
        self.gz.close()
        self.sink.flush()


class _Stream:
    """The write-only, unseekable file zipfile writes to (it then writes data descriptors)."""

    def __init__(self, sink: Chunks):
        self.sink = sink

    def write(self, data) -> int:
        return self.sink.write(data)

    def flush(self) -> None:
        pass


def _zip_time(mtime: float) -> tuple:
    t = dt.datetime.fromtimestamp(max(mtime, 0), dt.timezone.utc).timetuple()[:6]
    return max(t, _ZIP_EPOCH) if t[0] < 2108 else (2107, 12, 31, 23, 59, 58)


class ZipWriter:
    """A zip (zip64 where needed) written as a stream; no links (left out, named in the comment)."""

    format = "zip"

    def __init__(self, out: Callable[[bytes], None]):
        self.sink = Chunks(out)
        self.zip = zipfile.ZipFile(_Stream(self.sink), "w", zipfile.ZIP_DEFLATED, allowZip64=True)
        self.written = Written()

    @staticmethod
    def _name(name: str) -> str:
        # zip names are UTF-8: a name that is not (a byte a student's tool wrote) gets U+FFFD
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")

    def _info(self, name: str, st: os.stat_result, directory: bool = False) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(self._name(name) + ("/" if directory else ""), _zip_time(st.st_mtime))
        info.create_system = 3  # unix: the mode below is meant
        info.external_attr = ((stat.S_IFDIR if directory else stat.S_IFREG) | _mode(st)) << 16
        if directory:
            info.external_attr |= 0x10  # MS-DOS directory flag
        return info

    def directory(self, name: str, st: os.stat_result) -> None:
        info = self._info(name, st, directory=True)
        info.compress_type = zipfile.ZIP_STORED
        self.zip.writestr(info, b"")

    def link(self, name: str, st: os.stat_result, target: bytes) -> None:
        self.skip(
            name,
            N_("a link to {target!r} (zip has no links; the tar.gz keeps them)").format(target=os.fsdecode(target)),
        )
        self.written.links += 1

    def file(self, name: str, st: os.stat_result, blocks: Iterator[bytes]) -> None:
        info = self._info(name, st)
        info.file_size = st.st_size  # zipfile decides zip64 by it
        first = next(blocks, b"")
        if compressible(first[:PROBE], st.st_size):
            info.compress_type = zipfile.ZIP_DEFLATED
            info._compresslevel = LEVEL  # zipfile's own attribute (3.11; an alias of compress_level later)
        else:
            info.compress_type = zipfile.ZIP_STORED
        with self.zip.open(info, "w") as f:
            if info.compress_type == zipfile.ZIP_DEFLATED and hasattr(f, "_compressor"):
                # ISA-L's deflate in zipfile's place (its writer's one compressor, made by open() and used from
                # the first write on): the same raw deflate stream, 3x as fast; without that attribute, zlib's
                f._compressor = isal_zlib.compressobj(LEVEL, isal_zlib.DEFLATED, -15)
            if first:
                f.write(first)
            for block in blocks:
                f.write(block)
        self.written.files += 1
        self.written.bytes += st.st_size

    def data(self, name: str, content: bytes) -> None:
        self.file(name, _made(len(content)), iter([content]) if content else iter(()))

    def skip(self, name: str, why: str) -> None:
        self.written.skipped.append(f"{name}: {why}")

    def close(self) -> None:
        if self.written.skipped:
            text = N_("Left out of this archive:") + "\n" + "\n".join(self.written.skipped)
            self.zip.comment = text.encode("utf-8", "replace")[:65000]
        self.zip.close()
        self.sink.flush()


WRITERS = {"tar.gz": TarGzWriter, "zip": ZipWriter}


def writer(kind: str, out: Callable[[bytes], None]):
    return WRITERS[kind](out)


def _made(size: int) -> os.stat_result:
    """The status of a file made here (a manifest): now, rw-r--r--."""
    now = time.time()
    return os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, size, now, now, now))


# -- reading a tree -------------------------------------------------------------------------------


def read_regular(tree: paths.Tree, rel: bytes, seen: os.stat_result) -> Iterator[bytes]:
    """The bytes of the regular file at `rel` (reached through no link) in CHUNK blocks: exactly
    `seen.st_size` of them (cut or padded with zeros, should the file differ from what was seen).

    Refuses (OSError) anything but the very regular file the walk saw: no FIFO is opened (it would
    block), no device node (it would read the host's device)."""
    if not stat.S_ISREG(seen.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", os.fsdecode(rel))
    fd = tree.open(rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino):
            raise OSError(errno.ESTALE, "the file changed while it was read", os.fsdecode(rel))
        left = seen.st_size
        while left > 0:
            block = os.read(fd, min(CHUNK, left))
            if not block:  # shorter than it was: keep the archive's promise
                block = b"\0" * min(CHUNK, left)
            left -= len(block)
            yield block
    finally:
        os.close(fd)


def add_tree(w, tree: paths.Tree, rel: bytes, name: str, check: Callable[[], None] | None = None) -> Written:
    """Put `rel` of `tree` (a directory with everything beneath it, a file, or a link as a link) into
    the archive as `name`; what it added. `check()` is called between entries and blocks (it raises
    Cancelled when nobody reads any more)."""
    before = Written(w.written.files, w.written.bytes, w.written.links, [])
    start_skipped = len(w.written.skipped)
    parts = paths.split(rel)
    rel = b"/".join(parts)
    st = tree.lstat(rel)

    def one(entry_rel: bytes, st: os.stat_result, entry_name: str) -> None:
        if check:
            check()
        if stat.S_ISDIR(st.st_mode):
            w.directory(entry_name, st)
        elif stat.S_ISREG(st.st_mode):
            w.file(entry_name, st, _checked(read_regular(tree, entry_rel, st), check))
        elif stat.S_ISLNK(st.st_mode):
            w.link(entry_name, st, tree.readlink(entry_rel))
        else:
            w.skip(entry_name, N_("a {kind}, not a file").format(kind=kind_of(st)))

    one(rel, st, name)
    if stat.S_ISDIR(st.st_mode):
        cut = len(rel) + 1 if rel else 0
        for e in tree.walk(rel):
            one(e.rel, e.st, name + "/" + os.fsdecode(e.rel[cut:]))
    return Written(
        w.written.files - before.files,
        w.written.bytes - before.bytes,
        w.written.links - before.links,
        w.written.skipped[start_skipped:],
    )


def _checked(blocks: Iterator[bytes], check) -> Iterator[bytes]:
    for block in blocks:
        if check:
            check()
        yield block


def kind_of(st: os.stat_result) -> str:
    """What an entry is, in the words the listing and the archives use."""
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return "unknown"
