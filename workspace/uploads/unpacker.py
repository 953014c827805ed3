"""Unpack one archive into the current directory, with bounds. Runs INSIDE the sandbox.

    python -I unpacker.py KIND ARCHIVE MAX_BYTES MAX_FILES      (KIND: tar | zip)

workspace/uploads/sandbox.py runs this file's text in a throwaway container that sees
only the archive (read-only) and the empty target directory, as uid 1000,
with no network, no capabilities and a read-only root. It relies on no
`tarfile` filter (Debian's Python has none, and the one of some patch
levels is bypassable): every member is checked before anything is written,
and then written by hand with O_NOFOLLOW. Were the checks fooled anyway, the
sandbox still holds: a write can only land in the target, as an unprivileged
user; the hub then walks the result with paths.Tree before publishing it.

Refused (exit 2, one JSON line {"error": sentence, "message": its template, "params": {...}}: the
template is in the message catalogues, so the hub can say it in its user's language): absolute names, `..`,
links pointing outside or through which a later member would be written,
hard links to anything but an earlier regular file, devices, fifos, an
entry twice, and more than MAX_BYTES expanded or MAX_FILES entries.
Success prints {"bytes": N, "files": N}. Standard library only.
"""

import json
import os
import posixpath
import stat
import sys
import tarfile
import zipfile

CHUNK = 1 << 20


def N_(message):
    """Marks a message for the catalogues (workspace/i18n.py's; this file imports nothing of workspace)."""
    return message


class Refused(Exception):
    """An archive refused, with the sentence that says why: a template with named `{placeholders}` and
    their values."""

    def __init__(self, message, **params):
        self.message, self.params = message, params
        super().__init__(message.format(**params) if params else message)


OUTSIDE = N_("{label} is refused: its entry “{name}” would be written outside the dataset.")
LINK_OUTSIDE = N_("{label} is refused: its link “{name}” points outside the dataset.")
TOO_LARGE = N_(
    "{label} unpacks to more than {max_bytes:,} bytes, more than your storage quota "
    "leaves; free space (the Storage page) or ask for a larger quota."
)


def clean_name(name, label):
    if not name or name.startswith("/") or "\0" in name:
        raise Refused(OUTSIDE, label=label, name=name)
    parts = [p for p in name.split("/") if p and p != "."]
    if ".." in parts:
        raise Refused(OUTSIDE, label=label, name=name)
    return "/".join(parts)


def inside(link_dir, target):
    """True if `target`, read from the directory `link_dir` (relative to the root), stays beneath the root."""
    if target.startswith("/"):
        return False
    depth = len([p for p in link_dir.split("/") if p])
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return False
        elif part and part != ".":
            depth += 1
    return True


class Plan:
    """The checks every member passes before anything is written."""

    def __init__(self, label, max_bytes, max_files):
        self.label, self.max_bytes, self.max_files = label, max_bytes, max_files
        self.names, self.links, self.files = {}, set(), set()
        self.bytes = 0

    def add(self, name, kind, size=0, linkname=None):
        label = self.label
        path = clean_name(name, label)
        if not path:
            if kind == "dir":
                return None  # "./"
            raise Refused(N_("{label} is refused: it has an entry without a name."), label=label)
        parents = path.split("/")[:-1]
        for i in range(1, len(parents) + 1):
            if "/".join(parents[:i]) in self.links:
                raise Refused(
                    N_("{label} is refused: its entry “{name}” would be written through a link."),
                    label=label,
                    name=name,
                )
        if path in self.names:
            if kind == "dir" and self.names[path] == "dir":
                return None
            raise Refused(N_("{label} is refused: it has the entry “{name}” twice."), label=label, name=name)
        if kind == "symlink":
            if not inside(posixpath.dirname(path), linkname or ""):
                raise Refused(LINK_OUTSIDE, label=label, name=name)
            self.links.add(path)
        elif kind == "hardlink":
            try:
                target = clean_name(linkname or "", label)
            except Refused:
                raise Refused(LINK_OUTSIDE, label=label, name=name)
            if target not in self.files:
                raise Refused(
                    N_("{label} is refused: its link “{name}” does not point to an earlier file in it."),
                    label=label,
                    name=name,
                )
        elif kind == "file":
            self.bytes += size
            self.files.add(path)
        elif kind != "dir":
            raise Refused(N_("{label} is refused: “{name}” is a device or pipe, not a file."), label=label, name=name)
        self.names[path] = kind
        if len(self.names) > self.max_files:
            raise Refused(
                N_(
                    "{label} has more than {max_files:,} entries, more than your storage quota "
                    "leaves; free space (the Storage page) or ask for a larger quota."
                ),
                label=label,
                max_files=self.max_files,
            )
        if self.bytes > self.max_bytes:
            raise Refused(TOO_LARGE, label=label, max_bytes=self.max_bytes)
        return path


class Writer:
    """Writes checked members, counting what is really written (a zip may lie about sizes)."""

    def __init__(self, plan):
        self.plan, self.written = plan, 0

    def mkdirs(self, path):
        os.makedirs(path, mode=0o755, exist_ok=True)

    def file(self, path, source):
        self.mkdirs(posixpath.dirname(path) or ".")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as out:
            while True:
                block = source.read(CHUNK)
                if not block:
                    break
                self.written += len(block)
                if self.written > self.plan.max_bytes:
                    raise Refused(
                        N_(
                            "{label} unpacks to more than {max_bytes:,} bytes, more "
                            "than your storage quota leaves; free space or ask for a larger quota."
                        ),
                        label=self.plan.label,
                        max_bytes=self.plan.max_bytes,
                    )
                out.write(block)

    def symlink(self, path, target):
        self.mkdirs(posixpath.dirname(path) or ".")
        os.symlink(target, path)

    def hardlink(self, path, target):
        self.mkdirs(posixpath.dirname(path) or ".")
        os.link(target, path, follow_symlinks=False)


def unpack_tar(archive, plan):
    try:
        tar = tarfile.open(archive)
    except (tarfile.TarError, EOFError, OSError):
        raise Refused(N_("{label} is not a readable tar archive."), label=plan.label)
    with tar:
        members = []
        try:
            for m in tar:
                kind = (
                    "dir"
                    if m.isdir()
                    else "file"
                    if m.isreg()
                    else "symlink"
                    if m.issym()
                    else "hardlink"
                    if m.islnk()
                    else "other"
                )
                path = plan.add(m.name, kind, m.size if kind == "file" else 0, m.linkname)
                if path is not None:
                    members.append((path, kind, m))
        except (tarfile.TarError, EOFError) as e:
            raise Refused(N_("{label} is a damaged tar archive ({error})."), label=plan.label, error=str(e))
        w = Writer(plan)
        for path, kind, m in members:
            if kind == "dir":
                w.mkdirs(path)
            elif kind == "file":
                w.file(path, tar.extractfile(m))
            elif kind == "symlink":
                w.symlink(path, m.linkname)
            else:
                w.hardlink(path, clean_name(m.linkname, plan.label))
        return w


def unpack_zip(archive, plan):
    try:
        z = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError):
        raise Refused(N_("{label} is not a readable zip archive."), label=plan.label)
    with z:
        members = []
        for info in z.infolist():
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise Refused(
                    N_("{label} is refused: it contains a link (“{name}”)."), label=plan.label, name=info.filename
                )
            kind = "dir" if info.is_dir() else "file" if stat.S_IFMT(mode) in (0, stat.S_IFREG) else "other"
            path = plan.add(info.filename, kind, info.file_size)
            if path is not None:
                members.append((path, kind, info))
        w = Writer(plan)
        for path, kind, info in members:
            if kind == "dir":
                w.mkdirs(path)
            else:
                with z.open(info) as source:
                    w.file(path, source)
        return w


def main(argv):
    kind, archive, max_bytes, max_files = argv[1], argv[2], int(argv[3]), int(argv[4])
    label = argv[5] if len(argv) > 5 else "The archive"
    plan = Plan(label, max_bytes, max_files)
    os.umask(0o022)
    try:
        w = unpack_zip(archive, plan) if kind == "zip" else unpack_tar(archive, plan)
    except Refused as e:
        print(json.dumps({"error": str(e), "message": e.message, "params": e.params}))
        return 2
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, ValueError) as e:
        failed = Refused(N_("{label} could not be unpacked ({error})."), label=label, error=f"{type(e).__name__}: {e}")
        print(json.dumps({"error": str(failed), "message": failed.message, "params": failed.params}))
        return 2
    print(json.dumps({"bytes": w.written, "files": len(plan.names)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
