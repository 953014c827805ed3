"""The `workspace` command's outputs part: download a saved output (or part of it), collect a course's work.

    workspace download NAME[#N] [PATH] [-o DEST] [--user U]
        a file: saved as DEST (default: its name here);
        a directory: its .tar.gz streamed and unpacked into DEST (a new or empty directory; default: its
        name here), or saved as it is when DEST ends with .tar.gz, .tgz or .zip
    workspace collect COURSE --path DIR [--before TIME] [--workspace W] [-o FILE]
        instructors: each student's DIR of their latest saved output in one archive (FILE, .tar.gz unless
        it ends with .zip), and a summary of its manifest

Unpacking is done here by hand, trusting nothing in the archive (it holds what students wrote, and
tarfile's own filter is bypassable on some Python patch levels, CVE-2025-4517): names that are absolute
or go up with `..` stop it; files are created new (never over anything, never through a link); links are
made last, and only those that stay inside without passing through another link; devices, pipes and hard
links are left out and named.
"""

from __future__ import annotations

import json
import os
import sys
import tarfile
import zipfile
import zlib
from pathlib import Path
from urllib.parse import quote

import urllib3

from workspace.cli.base import CLIError, get_stream, name_and_number, size_text, user_locale
from workspace.i18n import translate

COMMANDS = ("download", "collect")
ARCHIVES = (".tar.gz", ".tgz", ".zip")
BLOCK = 1 << 20
# how an unpacked file is opened: created new, never over anything, never through a link
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


def add_parsers(cmds) -> None:
    loc = user_locale()
    d = cmds.add_parser("download", help=translate(loc, "download a saved output, one of its directories or one file"))
    d.add_argument(
        "what",
        metavar="NAME[#N]",
        help=translate(loc, "the workspace, and which execution's output (default: the latest)"),
    )
    d.add_argument(
        "path", nargs="?", default="", help=translate(loc, "a directory or file inside the output (default: all of it)")
    )
    d.add_argument(
        "-o",
        "--output",
        metavar="DEST",
        help=translate(loc, "where to put it (a .tar.gz or .zip name: keep the archive)"),
    )
    d.add_argument(
        "--user", metavar="U", help=translate(loc, "a student's output (instructors; administrators: anyone's)")
    )
    c = cmds.add_parser("collect", help=translate(loc, "instructors: every student's work at a path, in one archive"))
    c.add_argument("course")
    c.add_argument(
        "--path", default="", help=translate(loc, "the directory or file to take from each output (like submission)")
    )
    c.add_argument(
        "--before", metavar="TIME", help=translate(loc, "the latest output saved before this (ISO, UTC unless it says)")
    )
    c.add_argument("--workspace", help=translate(loc, "the workspace to take it from (default: the course's)"))
    c.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help=translate(loc, "the archive (default COURSE-PATH.tar.gz; .zip for a zip)"),
    )


def run(args, client, out=sys.stdout) -> None:
    if args.command == "download":
        download(client, args.what, args.path, args.output, args.user, out)
    else:
        collect(client, args.course, args.path, args.before, args.workspace, args.output, out)


def save_stream(r, dest: Path) -> int:
    """Write a response's body to `dest` (through DEST.part, renamed once whole); its size."""
    part = dest.with_name(dest.name + ".part")
    size = 0
    try:
        with open(part, "wb") as f:
            for block in r.iter_content(BLOCK):
                f.write(block)
                size += len(block)
        os.replace(part, dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    finally:
        r.close()
    return size


def execution(client, what: str, user: str | None) -> tuple[str, int]:
    """(workspace, number) of NAME#N, or of NAME's latest execution with a saved output."""
    name, number = name_and_number(what)
    if number is not None:
        return name, number
    rows = client.call("GET", f"/workspaces/{quote(name, safe='')}/executions", params={"user": user} if user else {})
    saved = [e["number"] for e in rows if e.get("has_output")]
    if not saved:
        raise CLIError(
            translate(user_locale(), "“{name}” has no saved output yet: its home is saved when it stops.", name=name)
        )
    return name, saved[-1]


def download(client, what: str, path: str, dest: str | None, user: str | None, out=sys.stdout) -> None:
    name, number = execution(client, what, user)
    url = f"/workspaces/{quote(name, safe='')}/executions/{number}/files/{quote(path.strip('/'), safe='/')}"
    whose = {"user": user} if user else {}
    r = get_stream(client, url, whose)
    is_dir = r.headers.get("Content-Type", "").startswith("application/json")
    if not is_dir:
        target = Path(dest or _basename(path) or f"{name}-{number}")
        if target.is_dir():
            target = target / (_basename(path) or f"{name}-{number}")
        size = save_stream(r, target)
        print_saved(target, size, name, number, out)
        return
    r.close()
    top = _basename(path) or f"{name}-{number}"
    if dest and dest.endswith(ARCHIVES):
        kind = "zip" if dest.endswith(".zip") else "tar.gz"
        size = save_stream(get_stream(client, url, {**whose, "archive": kind}), Path(dest))
        print_saved(dest, size, name, number, out)
        return
    unpack_directory(client, url, whose, Path(dest or top), name, number, out)


def print_saved(path, size: int, name: str, number: int, out) -> None:
    print(
        translate(
            user_locale(),
            "saved {path} ({size}) from {name} #{number}",
            path=path,
            size=size_text(size),
            name=name,
            number=number,
        ),
        file=out,
    )


def unpack_directory(client, url: str, whose: dict, target: Path, name: str, number: int, out) -> None:
    """A directory of an output, streamed as .tar.gz and unpacked into `target` (new, or an empty
    directory); what was left out is named."""
    loc = user_locale()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CLIError(
            translate(loc, "{path} exists and is not an empty directory; choose another with -o.", path=target)
        )
    target.mkdir(parents=True, exist_ok=True)
    r = get_stream(client, url, {**whose, "archive": "tar.gz"})
    try:
        done = unpack_tar(r.raw, target)
    finally:
        r.close()
    print(
        translate(
            loc,
            "unpacked {files:,} files ({size}), {links} links into {path} from {name} #{number}",
            files=done.files,
            size=size_text(done.bytes),
            links=done.links,
            path=target,
            name=name,
            number=number,
        ),
        file=out,
    )
    for line in done.skipped[:50]:
        print("  " + translate(loc, "left out {entry}", entry=line), file=out)
    if len(done.skipped) > 50:
        print("  " + translate(loc, "… and {count} more left out", count=len(done.skipped) - 50), file=out)


def _basename(path: str) -> str:
    return path.strip("/").rsplit("/", 1)[-1]


def collect(
    client, course: str, path: str, before: str | None, workspace: str | None, dest: str | None, out=sys.stdout
) -> None:
    target = Path(dest or f"{course}-{_basename(path) or 'work'}.tar.gz")
    params = {"path": path, "archive": "zip" if target.name.endswith(".zip") else "tar.gz"}
    if before:
        params["before"] = before
    if workspace:
        params["workspace"] = workspace
    size = save_stream(get_stream(client, f"/courses/{quote(course, safe='')}/collect", params), target)
    rows = manifest(target)
    got = [r for r in rows if r["status"] == "collected"]
    loc = user_locale()
    print(
        translate(
            loc,
            "saved {path} ({size}): {collected} of {students} students' work",
            path=target,
            size=size_text(size),
            collected=len(got),
            students=len(rows),
        ),
        file=out,
    )
    for row in rows:
        if row["status"] != "collected":
            line = translate(loc, "nothing: {reason}", reason=row["reason"])
        elif row["reason"]:
            line = translate(
                loc,
                "#{execution} saved {saved_at}, {files:,} files, {size} ({reason})",
                execution=row["execution"],
                saved_at=row["saved_at"],
                files=row["files"],
                size=size_text(row["bytes"]),
                reason=row["reason"],
            )
        else:
            line = translate(
                loc,
                "#{execution} saved {saved_at}, {files:,} files, {size}",
                execution=row["execution"],
                saved_at=row["saved_at"],
                files=row["files"],
                size=size_text(row["bytes"]),
            )
        print(f"  {row['student']:<20} {line}", file=out)


def manifest(archive: Path) -> list[dict]:
    """The manifest.json of a collection archive (its last member)."""
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            name = next(n for n in reversed(z.namelist()) if n.endswith("/manifest.json"))
            return json.loads(z.read(name))
    with tarfile.open(archive, "r:gz") as t:
        found = None
        for m in t:  # read, never extracted
            if m.isfile() and m.name.endswith("/manifest.json") and m.name.count("/") == 1:
                found = t.extractfile(m).read()
        return json.loads(found or b"[]")


# -- unpacking a tar stream safely ----------------------------------------------------------------------


class Unpacked:
    def __init__(self):
        self.files = self.bytes = self.links = 0
        self.skipped: list[str] = []


def clean(name: str, strip: int) -> list[str] | None:
    """The components of a member's name below its first `strip` ones; None for those top ones; a
    CLIError for a name that is absolute, goes up, or (on Windows) has a drive or a backslash."""
    bad = not name or name.startswith("/") or "\0" in name
    if os.sep == "\\" or os.altsep:
        bad = bad or "\\" in name or ":" in name
    parts = [p for p in name.split("/") if p and p != "."]
    if bad or ".." in parts:
        raise CLIError(
            translate(
                user_locale(),
                "The archive is refused: its entry “{entry}” would be written outside the directory.",
                entry=name[:200],
            )
        )
    if len(parts) <= strip:
        return None
    return parts[strip:]


def escapes(parts: list[str], target: str, links: set[str]) -> str | None:
    """Why a link at `parts` with this target may not be made (None: it stays inside, through no link)."""
    loc = user_locale()
    if not target or target.startswith("/") or "\0" in target or (os.sep == "\\" and (":" in target or "\\" in target)):
        return translate(loc, "it points outside")
    where = [p.casefold() for p in parts[:-1]]
    for comp in target.split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if not where:
                return translate(loc, "it points outside")
            where.pop()
            continue
        where.append(comp.casefold())
        if "/".join(where) in links:
            return translate(loc, "it points through another link")
    return None


def _mkdirs(root: Path, parts: list[str], mode: int = 0o755) -> Path:
    """Make the directories `parts` beneath `root`, refusing any that exists as something else."""
    here = root
    for part in parts:
        here = here / part
        try:
            os.mkdir(here, mode)
        except FileExistsError:
            if here.is_symlink() or not here.is_dir():
                raise CLIError(
                    translate(
                        user_locale(),
                        "The archive is refused: “{path}” would be written through what is not a directory.",
                        path=here,
                    )
                )
    return here


def unpack_tar(stream, dest: Path, strip: int = 1) -> Unpacked:
    """Unpack a .tar.gz read as a stream into the (new, empty) directory `dest`, dropping the first
    `strip` components of each name (the archive's top directory)."""
    done = Unpacked()
    loc = user_locale()
    links: list[tuple[list[str], str]] = []
    try:
        tar = tarfile.open(fileobj=stream, mode="r|gz")
    except tarfile.TarError as e:
        raise CLIError(translate(loc, "The download is not a .tar.gz ({error}).", error=e))
    with tar:
        try:
            for m in tar:
                parts = clean(m.name, strip)
                if parts is None:
                    continue
                shown = "/".join(parts)
                if m.isdir():
                    _mkdirs(dest, parts, (m.mode & 0o777) | 0o700)
                elif m.isreg():
                    unpack_file(tar, m, dest, parts, done)
                elif m.issym():
                    links.append((parts, m.linkname))
                elif m.islnk():
                    done.skipped.append(translate(loc, "{entry}: a hard link", entry=shown))
                else:
                    done.skipped.append(translate(loc, "{entry}: a device or pipe", entry=shown))
        except (tarfile.TarError, EOFError, zlib.error, urllib3.exceptions.HTTPError) as e:
            raise CLIError(
                translate(loc, "The download was cut or is not a whole .tar.gz ({error}); try again.", error=e)
            )
    make_links(dest, links, done)
    return done


def unpack_file(tar, m, dest: Path, parts: list[str], done: Unpacked) -> None:
    """A regular file of the archive, created new (never over anything, never through a link), with its
    mode less any setuid or setgid bit, and its time."""
    parent = _mkdirs(dest, parts[:-1])
    try:
        fd = os.open(parent / parts[-1], NEW_FILE, 0o600)
    except FileExistsError:
        done.skipped.append(translate(user_locale(), "{entry}: it is in the archive twice", entry="/".join(parts)))
        return
    with os.fdopen(fd, "wb") as f:
        source = tar.extractfile(m)
        while block := source.read(BLOCK):
            f.write(block)
            done.bytes += len(block)
        if hasattr(os, "fchmod"):
            os.fchmod(f.fileno(), (m.mode & 0o777) | 0o600)  # no setuid or setgid bit
    _utime(parent / parts[-1], m.mtime)
    done.files += 1


def make_links(dest: Path, links: list[tuple[list[str], str]], done: Unpacked) -> None:
    """The archive's symbolic links, made once all else is written: only those that stay inside without
    passing through another link; the others are named as left out."""
    loc = user_locale()
    made = {"/".join(p).casefold() for p, _ in links}
    for parts, target in links:
        shown = "/".join(parts)
        why = escapes(parts, target, made)
        if why is None and any("/".join(parts[:i]).casefold() in made for i in range(1, len(parts))):
            why = translate(loc, "it would be made inside another link")
        if why is None:
            try:
                os.symlink(target, _mkdirs(dest, parts[:-1]) / parts[-1])
                done.links += 1
                continue
            except (OSError, NotImplementedError) as e:
                why = translate(
                    loc, "it could not be made here ({error})", error=e.strerror if isinstance(e, OSError) else e
                )
        done.skipped.append(f"{shown} -> {target}: {why}")


def _utime(path: Path, mtime: float) -> None:
    try:
        os.utime(path, (mtime, mtime), follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass
