"""REST API of outputs' files and of collecting a course's work, under /services/workspace/api/.

    GET /api/workspaces/{name}/executions/{n}/files/{path}
            a directory: one page of its listing (?offset=&limit=, at most 1,000 entries a page);
            with ?archive=tar.gz or ?archive=zip: all of it as one archive, streamed;
            a file: its bytes, as an attachment (?inline=1: a preview, an image as itself and anything
            else as plain text), with a single byte range if asked
    GET /api/courses/{course}/collect?path=&before=&archive=&workspace=
            instructors of the course and administrators: one archive holding, for each enrolled student,
            `path` of their latest saved output of the course's workspace (or the latest saved before
            `before`), and manifest.csv / manifest.json

Who may read whose output is the API's rule (api.py): one's own; `?user=` for administrators, and for
instructors, read-only, their course's students. The tree is read by workspace/outputs/files.py in
threads of this module's own pool (a 5 GB download must not take the threads every other request
waits on), and written into archives by workspace/outputs/archives.py, each archive by a thread of its own
into a bounded queue that this handler empties into the response, flushing each chunk: a download
holds a few MiB whatever its size, and a slow client slows its writer instead of filling memory. A
user has at most MAX_ARCHIVES archive downloads at once (429 beyond), and a client that takes nothing
for STALL_SECONDS is cut off, so stalled downloads hold neither threads nor memory for long.

A file is served with `X-Content-Type-Options: nosniff` and a CSP sandbox: an HTML file in an output
never runs script with this origin's rights, even opened directly.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

from jupyterhub.scopes import Scope, parse_scopes
from tornado import web
from tornado.iostream import StreamClosedError

from workspace import i18n
from workspace.errors import UserError
from workspace.executions import check_workspace_name, number_of
from workspace.outputs import archives
from workspace.outputs import files as output_files
from workspace.outputs import saved as outputs
from workspace.reports import accounting
from workspace.service.api import READ_SCOPE, APIHandler
from workspace.store import paths

log = logging.getLogger("workspace.service")

# threads that read outputs' files for listings and downloads, apart from the default pool (archives are
# written each in a thread of its own)
POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="outputs")
QUEUE_CHUNKS = 8  # chunks of archives.CHUNK between a writer thread and its response
MAX_ARCHIVES = 4  # one user's archive downloads at once
STALL_SECONDS = 300  # a client that takes nothing for this long is cut off
_archives_of: collections.Counter = collections.Counter()  # the event loop's own: no lock
CSP = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'"
_RANGE = re.compile(r"^bytes=(\d{0,18})-(\d{0,18})$")


class Pipe:
    """Chunks from a writer thread to the handler's coroutine, at most `depth` waiting."""

    def __init__(self, loop: asyncio.AbstractEventLoop, depth: int = QUEUE_CHUNKS):
        self.loop = loop
        self.queue: asyncio.Queue = asyncio.Queue(depth)
        self.gone = threading.Event()

    def put(self, item) -> None:
        """(writer thread) Hand over a chunk, waiting while the queue is full; Cancelled once nobody reads."""
        self.check()
        fut = asyncio.run_coroutine_threadsafe(self.queue.put(item), self.loop)
        while True:
            try:
                return fut.result(timeout=1)
            except concurrent.futures.TimeoutError:
                if self.gone.is_set():
                    fut.cancel()
                    raise archives.Cancelled() from None

    def check(self) -> None:
        if self.gone.is_set():
            raise archives.Cancelled()

    async def get(self):
        return await self.queue.get()

    def close(self) -> None:
        self.gone.set()


def pool_run(fn, *args):
    return asyncio.get_running_loop().run_in_executor(POOL, fn, *args)


class OutputsHandler(APIHandler):
    @property
    def store(self):
        return self.settings["workspace_store"]

    @property
    def node_stores(self):
        return self.settings.get("node_stores")

    @property
    def record_store(self):
        """The store of record, where outputs are copied after their save (None: none configured)."""
        return self.settings.get("record_store")

    def decode_argument(self, value: bytes, name: str | None = None) -> str:
        # a path in an output need not be UTF-8 (a name is bytes): its other bytes become surrogate escapes
        if name is None and value is not None:
            return value.decode("utf-8", "surrogateescape")
        return super().decode_argument(value, name)

    def archive_format(self, default: str | None = None) -> str | None:
        kind = self.get_argument("archive", default)
        if kind is not None and kind not in archives.FORMATS:
            raise UserError(
                400,
                "“archive” must be {formats}, not {given!r}.",
                formats=" or ".join(archives.FORMATS),
                given=kind[:40],
            )
        return kind

    own_chunks = False  # after the first, an archive's chunks are framed here, not by tornado (frame_chunks)

    def frame_chunks(self) -> None:
        """Frame the response's chunks (HTTP/1.1's chunked encoding, which tornado uses for a response of
        no Content-Length) here after the first: tornado frames one by joining the size, the chunk and
        CRLF into a new bytes, a copy of every byte of an archive on the event loop's thread (half the
        service's time for a 2 GB tar.gz, #34); here the three go to the socket's buffer as they are.
        Tornado still writes the last chunk when the response finishes. HTTP/1.0 has no chunks."""
        self.own_chunks = self.request.version == "HTTP/1.1"

    async def send(self, data: bytes) -> None:
        """Write and flush one chunk; a client that takes none of it for STALL_SECONDS is cut off
        (StreamClosedError), so that a stalled download holds nothing for long."""
        if not data:
            return  # (an empty chunk would end a chunked response)
        if self.own_chunks and self._headers_written:
            flushed = self.write_through([b"%x\r\n" % len(data), data, b"\r\n"])
        else:
            self.write(bytes(data))  # (a gathered chunk is a bytearray, which tornado's write refuses)
            flushed = self.flush()
        try:
            await asyncio.wait_for(asyncio.shield(flushed), STALL_SECONDS)
        except asyncio.TimeoutError:
            flushed.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no warning
            log.info("%s took nothing for %d s: closing the download", self.request.remote_ip, STALL_SECONDS)
            self.request.connection.close()
            raise StreamClosedError() from None

    def write_through(self, pieces: list) -> asyncio.Future:
        """Write `pieces` to the connection's stream each as it is, past tornado's framing (frame_chunks);
        the future of the last, done once all of them are sent."""
        stream = self.request.connection.stream
        for piece in pieces:
            flushed = stream.write(piece)
        return flushed

    async def stream_archive(self, produce, kind: str, name: str) -> None:
        """Send the archive `produce(writer, check)` writes (in a thread of its own), chunk by chunk; at
        most MAX_ARCHIVES of one user's at once (429 beyond)."""
        who = self.caller()["name"]
        if _archives_of[who] >= MAX_ARCHIVES:
            raise UserError(
                429,
                "You have {count} archive downloads under way; wait until one has finished "
                "(or stop it), then try again.",
                count=_archives_of[who],
            )
        loop = asyncio.get_running_loop()
        pipe = Pipe(loop)
        finished = loop.create_future()
        self.set_header("Content-Type", archives.CONTENT_TYPES[kind])
        self.set_header("Content-Disposition", output_files.disposition(os.fsencode(f"{name}.{kind}"), False))
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")
        self.frame_chunks()
        _archives_of[who] += 1
        # a thread of its own, not the pool's: a download that waits on a slow client holds only itself
        writer = threading.Thread(
            target=write_archive, args=(produce, kind, pipe, finished), name=f"archive {who}", daemon=True
        )
        writer.start()
        try:
            await self.relay(pipe, name)
        finally:
            pipe.close()
            await finished
            _archives_of[who] -= 1
            if not _archives_of[who]:
                del _archives_of[who]

    async def relay(self, pipe: Pipe, name: str) -> None:
        """Send the archive's chunks from `pipe` until its end; an error before the first byte is the
        response's, after it the download is cut."""
        sent = 0
        try:
            while True:
                item = await pipe.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    if sent == 0 and isinstance(item, web.HTTPError):
                        raise item
                    log.error("writing the archive %s failed after %d bytes", name, sent, exc_info=item)
                    if sent == 0:
                        raise web.HTTPError(500)
                    # the client must see a cut download, not an archive that looks whole
                    self.request.connection.close()
                    return
                await self.send(item)
                sent += len(item)
        except StreamClosedError:
            log.info("the download of %s stopped after %d bytes: the client went away", name, sent)


def write_archive(produce, kind: str, pipe: Pipe, finished: asyncio.Future) -> None:
    """(the archive's own thread) Write the archive `produce` makes into `pipe`, then None, or the error in
    its place; `finished` is done once the thread is."""
    try:
        w = archives.writer(kind, pipe.put)
        produce(w, pipe.check)
        w.close()
        pipe.put(None)
    except archives.Cancelled:
        pass
    except BaseException as e:  # the handler says so, and logs it
        try:
            pipe.put(e)
        except archives.Cancelled:
            pass
    finally:
        pipe.loop.call_soon_threadsafe(lambda: finished.done() or finished.set_result(None))


def _open(root, rel: bytes):
    with paths.Tree(root) as tree:
        return output_files.open_file(tree, rel)


def _stat(root, rel: bytes):
    """(status, a link's target or None) of `rel` itself."""
    with paths.Tree(root) as tree:
        st = output_files.resolve(tree, rel)
        return st, tree.readlink(rel) if archives.kind_of(st) == "link" else None


def _listing(root, rel: bytes, offset: int, limit: int) -> dict:
    with paths.Tree(root) as tree:
        return output_files.listing(tree, rel, offset, limit)


def _tree_archive(root, rel: bytes, name: str):
    def produce(w, check):
        with paths.Tree(root) as tree:
            archives.add_tree(w, tree, rel, name, check)

    return produce


class FilesHandler(OutputsHandler):
    """A directory's listing, a directory as an archive, or a file, of a saved output."""

    async def get(self, name: str, number: str, path: str | None):
        rel = output_files.parse_path(path)
        kind = self.archive_format()
        offset, limit = output_files.page_args(self.get_argument("offset", None), self.get_argument("limit", None))
        inline = self.get_argument("inline", "") in ("1", "true", "yes")
        owner = await self.owner()
        number = number_of(number)  # no such execution (and no 4,300-digit int to parse)
        out = await self.blocking(
            outputs.locate, self.db, self.store, self.node_stores, owner, name, number, self.record_store
        )
        st, target = await pool_run(_stat, out.root, rel)
        if archives.kind_of(st) == "dir":
            if kind:
                top = output_files.archive_name(out.label, rel)
                return await self.stream_archive(_tree_archive(out.root, rel, top), kind, top)
            page = await pool_run(_listing, out.root, rel, offset, limit)
            return self.write_json(
                {"owner": owner, "workspace": name, "number": out.number, "saved": out.saved, **page}
            )
        if target is not None:
            raise output_files.is_a_link(rel, target)
        if kind:
            raise UserError(
                400, "“{path}” is not a directory; download it without “archive”.", path=output_files.shown(rel)
            )
        fd, st = await pool_run(_open, out.root, rel)
        try:
            await self.send_file(fd, st.st_size, rel, inline)
        finally:
            os.close(fd)

    async def send_file(self, fd: int, size: int, rel: bytes, inline: bool) -> None:
        start, end = 0, size  # [start, end)
        wanted = self.request.headers.get("Range")
        if wanted:
            m = _RANGE.match(wanted.strip())
            first, last = (m.group(1), m.group(2)) if m else ("", "")
            if m and first:
                start, end = int(first), min(size, int(last) + 1) if last else size
            elif m and last:
                start = max(0, size - int(last))
            if not m or (not first and not last) or start >= end:
                self.set_header("Content-Range", f"bytes */{size}")
                message = i18n.translate(
                    self.lang,
                    "The range {wanted!r} is not within the file's {size:,} bytes.",
                    wanted=wanted[:60],
                    size=size,
                )
                return self.write_json({"status": 416, "message": message}, 416)
            self.set_status(206)
            self.set_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.set_header("Accept-Ranges", "bytes")
        self.set_header("Content-Type", output_files.content_type(rel, inline))
        self.set_header("Content-Disposition", output_files.disposition(rel, inline))
        self.set_header("Content-Length", str(end - start))
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("Cache-Control", "private, no-cache")
        pos = start
        try:
            while pos < end:
                block = await pool_run(os.pread, fd, min(archives.CHUNK, end - pos), pos)
                if not block:  # shorter than it said: cut the response rather than pad it
                    log.error("%s ended at %d of %d bytes", output_files.shown(rel), pos, end)
                    self.request.connection.close()
                    return
                await self.send(block)
                pos += len(block)
        except StreamClosedError:
            pass


class CollectHandler(OutputsHandler):
    """One archive of a course's enrolled students' work at a path, with a manifest."""

    def may_collect(self, course: str) -> bool:
        user = self.caller()
        granted = parse_scopes(user.get("scopes") or []).get(READ_SCOPE)
        return bool(user.get("admin")) or granted is Scope.ALL or bool(granted and course in granted.get("group", ()))

    async def get(self, course: str):
        if not self.may_collect(course):
            raise UserError(
                403, "Only the instructors of “{course}” (and administrators) may collect its work.", course=course
            )
        rel = output_files.parse_path(self.get_argument("path", ""))
        before = accounting.parse_time(self.get_argument("before", None), "before")
        kind = self.archive_format("tar.gz")
        workspace = self.get_argument("workspace", None)
        if workspace is not None:
            check_workspace_name(workspace)
        group = await self.service_hub(f"/groups/{quote(course, safe='')}")
        if group is None:
            raise UserError(404, "There is no course “{course}” (no group of that name).", course=course)
        if workspace is None:
            workspace = await self.blocking(outputs.course_workspace, self.db, course)
        members = sorted(group.get("users") or [])
        # students only: an administrator or an instructor put into the group is not collected
        refused = await self.privileged(members)
        students = [m for m in members if m not in refused]
        items = await self.blocking(
            outputs.collection,
            self.db,
            self.store,
            self.node_stores,
            students,
            workspace,
            before,
            {n: i18n.translate(self.lang, "not a student ({reason})", reason=why) for n, why in refused.items()},
            self.record_store,
            self.lang,
        )
        top = f"{course}-" + (output_files.archive_name(workspace, rel) if rel else workspace)
        log.info("%s collects %s of %d student(s) of %s", self.caller()["name"], top, len(students), course)
        await self.stream_archive(
            lambda w, check: outputs.write_collection(w, items, rel, top, check, self.lang), kind, top
        )


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}api/workspaces/([^/]+)/executions/(\d+)/files(?:/(.*))?", FilesHandler),
        (rf"{prefix}api/courses/([^/]+)/collect/?", CollectHandler),
    ]
