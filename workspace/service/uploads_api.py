"""Resumable uploads of dataset versions, under /services/workspace/api/datasets/{owner}/{name}/uploads.

    POST   .../uploads                   {"filename", "size", "sha256"?, "unpack"?}  -> {"id", "offset": 0}
    PUT    .../uploads/{id}?offset=N     the bytes from N on (any length); streamed to disk
    GET    .../uploads/{id}              {"offset", "size", ...}: where to resume after a dropped connection
    POST   .../uploads/{id}/complete     {"sha256"?}: check size and checksum, make the version
    DELETE .../uploads/{id}              cancel

A chunk that was cut off keeps the bytes that arrived; GET tells the offset
to resume from. Memory use does not grow with the file: bodies are streamed
to disk in the pieces the server receives. What an upload may be, whose it is and how it becomes a
version are workspace/uploads/staging.py's rules; the handlers parse, stream and answer.
"""

from __future__ import annotations

import asyncio

from tornado import web

from workspace.errors import UserError
from workspace.service.datasets_api import DatasetHandler
from workspace.uploads import staging as uploads
from workspace.uploads.staging import Upload

MAX_CHUNK = 64 << 30  # one PUT may carry the whole file
BLOCK = 4 << 20  # bytes written and hashed at once (a 2 GB upload: 512 thread hand-offs, not 32,768)


class UploadBase(DatasetHandler):
    @property
    def receiving(self):
        return self.settings["receiving"]

    def upload(self, owner: str, name: str, upload_id: str) -> Upload:
        # looked up before the caller is: a missing upload is a 404 to anyone
        up = Upload(self.store.uploads_dir, upload_id)
        meta = up.meta()
        uploads.check_uploader(meta, owner, name, self.who())
        return up


class UploadsHandler(UploadBase):
    async def post(self, owner, name):
        who = self.who()
        data = self.body()
        up = await self.blocking(
            uploads.begin,
            self.db,
            self.store,
            owner,
            name,
            data,
            who,
            quota=self.settings["storage_quota"],
            max_pending=self.settings["upload_policy"].max_pending,
        )
        self.write_json({"id": up.id, "offset": 0, "size": data["size"]}, status=201)


@web.stream_request_body
class UploadHandler(UploadBase):
    """PUT streams a chunk to disk as it arrives: written (and hashed, uploads/receiving.py) in blocks of
    `BLOCK` bytes off the event loop, one thread hand-off per block rather than per network read, while
    the next block arrives (reading, writing and hashing one after the other cost 200 MB/s here)."""

    _file = None
    _refusal = None
    _receiving = None  # the upload id while this PUT holds it (one PUT at a time per upload)
    _storing = None  # the block being written and hashed in worker threads

    async def prepare(self):
        # A request refused here is answered only after its body is read (and
        # dropped): refusing before would close the connection mid-upload, and
        # the proxy would answer the client 503 instead of the sentence.
        if self.request.method in ("GET", "DELETE"):
            return
        if self.request.method != "PUT":
            self._refusal = UserError(
                405, "{method} is not an upload operation: use PUT, GET or DELETE.", method=self.request.method
            )
            return
        try:
            self.request.connection.set_max_body_size(MAX_CHUNK)
            owner, name, upload_id = self.path_args
            try:
                start = int(self.get_argument("offset", "0"))
            except ValueError:
                raise UserError(400, "“offset” must be a byte position.")
            up = await self.blocking(self.upload, owner, name, upload_id)
            self._meta = up.meta()
            self._hash = self.receiving.begin(upload_id, start)
            self._receiving = upload_id
            self._written = self._stored = start
            self._pending, self._pending_bytes, self._storing = [], 0, None
            self._file = await self.blocking(up.open_at, start)
        except web.HTTPError as e:
            self._close()
            self._refusal = e

    async def post(self, *args):
        raise self._refusal or web.HTTPError(405)

    async def data_received(self, chunk: bytes):
        if self._file is None:
            return  # prepare() refused the request; the body is dropped
        self._written += len(chunk)
        if self._written > self._meta["size"]:
            self._close()
            self._refusal = UserError(
                400, "The upload is longer than the {size:,} bytes announced.", size=self._meta["size"]
            )
            return
        self._pending.append(chunk)
        self._pending_bytes += len(chunk)
        if self._pending_bytes >= BLOCK:
            await self._write_pending()

    async def _write_pending(self):
        """The next block on its way while the network goes on: written by one worker thread and hashed by
        another at the same time (hashlib lets go of the GIL), after the previous block's writing and
        hashing, so each stays in order; at most one block is stored while the next one arrives."""
        pieces, size = self._pending, self._pending_bytes  # as they came: never joined (a copy of each)
        self._pending, self._pending_bytes = [], 0
        if self._storing is not None:
            await self._storing
        loop = asyncio.get_running_loop()
        steps = [loop.run_in_executor(None, self._write, pieces, size)]
        if self._hash is not None:
            steps.append(loop.run_in_executor(None, self._digest, pieces))
        self._storing = asyncio.gather(*steps)

    def _write(self, pieces: list[bytes], size: int) -> None:
        self._file.writelines(pieces)
        self._stored += size

    def _digest(self, pieces: list[bytes]) -> None:
        for piece in pieces:
            self._hash.update(piece)

    def on_finish(self):
        self._close()

    def on_connection_close(self):
        # a dropped connection keeps what was written; the client resumes from GET's offset
        self._close()

    def _close(self, complete: bool = False):
        """The file closed and the upload let go; its running hash kept only after a chunk that ended
        normally, every byte of it written (`complete`). While a block is still being written (a dropped
        connection, a body longer than announced), that waits for it: a resumed chunk must not start on
        the file's end before the last write has landed there (until then a resume is told 409)."""
        storing = self._storing
        if storing is not None and not storing.done():
            self._closing = asyncio.ensure_future(self._close_after(storing))
            return
        if storing is not None and not storing.cancelled():
            storing.exception()  # looked at: a failed write was raised where the chunk awaited it, if anywhere
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._receiving is not None:
            self.receiving.end(self._receiving, self._stored, self._hash if complete else None)
            self._receiving = None

    async def _close_after(self, storing) -> None:
        await asyncio.wait([storing])
        self._close()

    async def put(self, owner, name, upload_id):
        if self._refusal is not None:
            raise self._refusal
        if self._pending:
            await self._write_pending()
        if self._storing is not None:
            await self._storing
        await self.blocking(self._file.flush)
        self._close(complete=True)
        self.write_json({"id": upload_id, "offset": self._written, "size": self._meta["size"]})

    async def get(self, owner, name, upload_id):
        def status():
            up = self.upload(owner, name, upload_id)
            meta = up.meta()
            return {"id": up.id, "offset": up.offset, "size": meta["size"], "filename": meta["filename"]}

        self.write_json(await self.blocking(status))

    async def delete(self, owner, name, upload_id):
        await self.blocking(lambda: self.upload(owner, name, upload_id).discard())
        self.receiving.forget(upload_id)
        self.set_status(204)
        self.finish()


class CompleteHandler(UploadBase):
    async def post(self, owner, name, upload_id):
        data = self.body()
        version = await self.blocking(
            uploads.complete,
            self.db,
            self.store,
            owner,
            name,
            upload_id,
            data.get("sha256"),
            self.who(),
            rules=self.rules,
            sandbox=self.settings["sandbox"],
            quota=self.settings["storage_quota"],
            received=self.receiving.sha256,  # the hash kept while the bytes came, if it covers them all
        )
        self.receiving.forget(upload_id)
        self.write_json(version, status=201)


def handlers(prefix: str) -> list:
    base = rf"{prefix}api/datasets/([^/]+)/([^/]+)/uploads"
    return [
        (rf"{base}/?", UploadsHandler),
        (rf"{base}/([0-9a-f]+)/?", UploadHandler),
        (rf"{base}/([0-9a-f]+)/complete/?", CompleteHandler),
    ]
