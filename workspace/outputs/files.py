"""The files of a saved output: a path inside it, a directory's listing page by page, a file opened to be
sent, a preview (text, image, notebook).

An output is a tree the student controlled entirely (workspace/store/paths.py says how such a tree is
read); everything here reads it through a `paths.Tree` opened at the output's root. A link is listed
with its target text and never followed, whether it is inside the path asked for or the path itself;
a FIFO or a device node is listed and never opened. Errors are `UserError`s with a sentence.

Paths come from URLs as `str` whose undecodable bytes are surrogate escapes (a name need not be
UTF-8), and go back to URLs percent-encoded from the name's bytes (`quoted`).
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import mimetypes
import os
import re
import stat
from urllib.parse import quote

from workspace import i18n
from workspace.errors import UserError
from workspace.outputs.archives import kind_of
from workspace.store import paths

MAX_LIMIT = 1000
DEFAULT_LIMIT = 200
MAX_OFFSET = 10**9
PREVIEW_BYTES = 64 << 10
NOTEBOOK_BYTES = 8 << 20
NOTEBOOK_TEXT = 20_000  # characters of one cell's source or of one output shown
IMAGES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
}
# types a browser would run or render with our origin's rights: always sent as bytes to save
ACTIVE = re.compile(r"html|xml|javascript|ecmascript|svg|pdf|x-shockwave|wasm", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def parse_path(raw: str | bytes | None) -> bytes:
    """The path inside an output, as bytes relative to its root (b"": the root); the user's 400 for an
    absolute path, `..` or a NUL byte."""
    raw = raw or ""
    data = os.fsencode(raw)
    if b"\0" in data:
        raise UserError(400, "A path inside an output cannot contain a NUL byte.")
    if data.startswith(b"/"):
        raise UserError(400, "Give a path inside the output, relative to its top (like “results/plot.png”), not “/…”.")
    try:
        return b"/".join(paths.split(data))
    except paths.Escape:
        raise UserError(400, "A path inside an output cannot go up with “..”; give it from the output's top.")


def page_args(offset: str | None, limit: str | None) -> tuple[int, int]:
    """(offset, limit) of a listing's page from the query; the user's 400 for anything but whole numbers
    in range (an offset past the end is an empty page)."""

    def number(value, name, default, low, high):
        if value is None or value == "":
            return default
        if not value.isdigit() or len(value) > 12 or not low <= int(value) <= high:
            raise UserError(
                400,
                "“{name}” must be a whole number from {low:,} to {high:,}, not {value!r}.",
                name=name,
                low=low,
                high=high,
                value=value[:40],
            )
        return int(value)

    return number(offset, "offset", 0, 0, MAX_OFFSET), number(limit, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)


def shown(rel: bytes) -> str:
    """A path as people read it (a byte that is not UTF-8 becomes U+FFFD)."""
    return rel.decode("utf-8", "replace")


def quoted(rel: bytes) -> str:
    """A path for a URL: its bytes percent-encoded, slashes kept."""
    return quote(rel, safe="/")


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def describe(rel: bytes, st: os.stat_result, target: bytes | None = None) -> dict:
    """One entry of a listing."""
    kind = kind_of(st)
    entry = {
        "name": shown(rel.rsplit(b"/", 1)[-1]) if rel else "",
        "path": shown(rel),
        "quoted": quoted(rel),
        "type": kind,
        "size": st.st_size if kind in ("file", "link") else None,
        "mtime": _when(st.st_mtime),
        "mode": f"{stat.S_IMODE(st.st_mode):04o}",
    }
    if kind == "link":
        entry["target"] = shown(target or b"")
    return entry


def resolve(tree: paths.Tree, rel: bytes) -> os.stat_result:
    """The status of `rel` itself (a link is a link); the user's 400 when it leads through a link, 404
    when there is nothing there."""
    try:
        return tree.lstat(rel)
    except paths.Escape:
        raise _through_link(rel)
    except (FileNotFoundError, NotADirectoryError):
        # a link on the way may read as "not a directory" (O_DIRECTORY on a link): say which it is
        parts = rel.split(b"/")
        for i in range(1, len(parts)):
            try:
                if stat.S_ISLNK(tree.lstat(b"/".join(parts[:i])).st_mode):
                    raise _through_link(rel)
            except (OSError, paths.Escape):
                break
        raise UserError(404, "There is no “{path}” in this output.", path=shown(rel))


def is_a_link(rel: bytes, target: bytes) -> UserError:
    return UserError(
        400,
        "“{path}” is a link to “{target}”; links in an output are shown, never followed.",
        path=shown(rel),
        target=shown(target),
    )


def _through_link(rel: bytes) -> UserError:
    return UserError(
        400,
        "“{path}” leads through a link; links in an output are shown, never followed. "
        "Give the path of a real directory or file.",
        path=shown(rel),
    )


def listing(tree: paths.Tree, rel: bytes, offset: int = 0, limit: int = DEFAULT_LIMIT) -> dict:
    """One page of the directory `rel`: directories first, then by name (bytewise), `limit` entries
    from `offset`, each with its type, size, time, and a link's target. The directory is read once
    as a stream; only `offset + limit` names are kept to sort (a directory of a million entries costs
    its page, not its size), and only the page's entries are looked at."""
    st = resolve(tree, rel)
    if not stat.S_ISDIR(st.st_mode):
        raise UserError(400, "“{path}” is a {kind}, not a directory.", path=shown(rel), kind=kind_of(st))
    fd = tree.opendir(rel)
    total = 0

    def keys():
        nonlocal total
        with os.scandir(fd) as it:  # a stream: the directory is never read whole into memory
            for de in it:
                total += 1
                try:
                    is_dir = de.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                yield (0 if is_dir else 1, os.fsencode(de.name))

    try:
        page = heapq.nsmallest(offset + limit, keys())[offset:]
        entries = []
        for _, name in page:
            try:
                est = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            target = os.readlink(name, dir_fd=fd) if stat.S_ISLNK(est.st_mode) else None
            entries.append(describe(rel + b"/" + name if rel else name, est, target))
    finally:
        os.close(fd)
    return {
        "path": shown(rel),
        "quoted": quoted(rel),
        "type": "dir",
        "total": total,
        "offset": offset,
        "limit": limit,
        "next_offset": offset + limit if offset + limit < total else None,
        "entries": entries,
    }


def open_file(tree: paths.Tree, rel: bytes) -> tuple[int, os.stat_result]:
    """(fd, status) of the regular file `rel`, opened beneath the tree's root without following a link
    and without blocking; the user's 4xx for a directory, a link, a FIFO or a device (never opened)."""
    st = resolve(tree, rel)
    kind = kind_of(st)
    if kind == "link":
        raise is_a_link(rel, tree.readlink(rel))
    if kind != "file":
        raise UserError(
            400, "“{path}” is a {kind}, not a file: there is nothing to download.", path=shown(rel), kind=kind
        )
    try:
        fd = tree.open(rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except paths.Escape:
        raise UserError(400, "“{path}” leads through a link; links in an output are never followed.", path=shown(rel))
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise UserError(409, "“{path}” changed while it was opened; try again.", path=shown(rel))
    return fd, opened


def content_type(rel: bytes, inline: bool) -> str:
    """What a file is sent as. Inline (a preview): an image as its type, anything else as plain text.
    As an attachment: its type, except those a browser would run or render (HTML, SVG, XML, PDF…),
    which are plain bytes."""
    name = shown(rel).lower()
    ext = os.path.splitext(name)[1]
    if inline:
        return IMAGES.get(ext, "text/plain; charset=utf-8")
    guessed = mimetypes.guess_type(name, strict=False)[0] or "application/octet-stream"
    return "application/octet-stream" if ACTIVE.search(guessed) else guessed


def disposition(rel: bytes, inline: bool) -> str:
    """A Content-Disposition naming the file (RFC 6266: an ASCII fallback and the UTF-8 name)."""
    name = rel.rsplit(b"/", 1)[-1] or b"output"
    ascii_name = re.sub(r"[^A-Za-z0-9._ -]", "_", shown(name))[:150] or "file"
    return f"{'inline' if inline else 'attachment'}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"


def archive_name(label: str, rel: bytes) -> str:
    """The top directory of a directory's archive: the directory's own name, or `label` for the root."""
    name = shown(rel.rsplit(b"/", 1)[-1]) if rel else label
    return re.sub(r"[/\\\0]", "_", name) or "output"


# -- previews ---------------------------------------------------------------------------------------


def preview_kind(rel: bytes) -> str:
    ext = os.path.splitext(shown(rel).lower())[1]
    if ext in IMAGES:
        return "image"
    if ext == ".ipynb":
        return "notebook"
    return "text"


def read_head(tree: paths.Tree, rel: bytes, size: int) -> tuple[bytes, os.stat_result]:
    """The first `size` bytes of the regular file `rel` (opened as `open_file` does)."""
    fd, st = open_file(tree, rel)
    try:
        chunks, left = [], size
        while left > 0:
            block = os.read(fd, min(left, 1 << 20))
            if not block:
                break
            chunks.append(block)
            left -= len(block)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def text_preview(data: bytes, size: int) -> dict:
    """The text of a file's first bytes, or why there is none (a binary file)."""
    if b"\0" in data[:8192]:
        return {"kind": "binary", "text": None, "truncated": False}
    text = data.decode("utf-8", "replace")
    if len(data) < size and text.endswith("\ufffd"):  # a character cut at the end of what was read
        text = text.rstrip("\ufffd")
    return {"kind": "text", "text": text, "truncated": len(data) < size}


def _text(value, locale: str = i18n.DEFAULT) -> str:
    if isinstance(value, list):
        value = "".join(v for v in value if isinstance(v, str))
    if not isinstance(value, str):
        return ""
    return value if len(value) <= NOTEBOOK_TEXT else value[:NOTEBOOK_TEXT] + "\n" + i18n.translate(locale, "… (cut)")


def notebook(data: bytes, locale: str = i18n.DEFAULT) -> list[dict]:
    """A notebook's cells for a page: each cell's type, source and text outputs (stream text, the
    plain-text form of results, errors without terminal colours). Nothing else of it is used: no
    HTML, JavaScript or widget output is shown (an image output is named, not shown; the notes are in
    `locale`). The user's 400 for what is no notebook."""
    try:
        nb = json.loads(data)
    except ValueError:
        raise UserError(400, "This .ipynb file is not a notebook (it is not JSON).")
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise UserError(400, "This .ipynb file is not a notebook (it has no cells).")
    out = []
    for cell in cells[:2000]:
        if not isinstance(cell, dict):
            continue
        shown_outputs = []
        for o in cell.get("outputs") or []:
            if not isinstance(o, dict):
                continue
            kind = o.get("output_type")
            if kind == "stream":
                shown_outputs.append({"kind": "stream", "text": _text(o.get("text"), locale)})
            elif kind in ("execute_result", "display_data"):
                bundle = o.get("data") if isinstance(o.get("data"), dict) else {}
                if "text/plain" in bundle:
                    shown_outputs.append({"kind": "result", "text": _text(bundle["text/plain"], locale)})
                others = sorted(k for k in bundle if k != "text/plain" and isinstance(k, str))
                if others:
                    note = i18n.translate(locale, "({types} not shown here)", types=", ".join(others)[:200])
                    shown_outputs.append({"kind": "note", "text": note})
            elif kind == "error":
                trace = o.get("traceback") if isinstance(o.get("traceback"), list) else []
                text = "\n".join(t for t in trace if isinstance(t, str)) or f"{o.get('ename')}: {o.get('evalue')}"
                shown_outputs.append({"kind": "error", "text": _ANSI.sub("", _text(text, locale))})
        count = cell.get("execution_count")
        out.append(
            {
                "type": cell.get("cell_type") if cell.get("cell_type") in ("code", "markdown", "raw") else "raw",
                "source": _text(cell.get("source"), locale),
                "count": count if isinstance(count, int) and not isinstance(count, bool) else None,
                "outputs": shown_outputs,
            }
        )
    return out
