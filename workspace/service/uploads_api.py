"""Resumable uploads of dataset versions, under /services/workspace/api/datasets/{owner}/{name}/uploads.

    POST   .../uploads                   {"filename", "size", "sha256"?, "unpack"?}  -> {"id", "offset": 0}
    PUT    .../uploads/{id}?offset=N     the bytes from N on (any length); streamed to disk
    GET    .../uploads/{id}              {"offset", "size", ...}: where to resume after a dropped connection
    POST   .../uploads/{id}/complete     {"sha256"?}: check size and checksum, make the version
    DELETE .../uploads/{id}              cancel

A chunk that was cut off keeps the bytes that arrived; GET tells the offset
to resume from. Memory use does not grow with the file: bodies are streamed
to disk in the pieces the server receives.
"""

from __future__ import annotations

import asyncio
import re

from tornado import web

from .. import dataset_versions, datasets, quotas
from ..errors import UserError
from ..uploads import Upload, archive_kind, pending, place
from .datasets_api import DatasetHandler

MAX_CHUNK = 64 << 30  # one PUT may carry the whole file
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class UploadBase(DatasetHandler):
    def quota_status(self, user: str) -> quotas.Status:
        _, groups, _ = self.who()
        return quotas.status(self.db, self.store, self.settings["storage_quota"], user, groups)

    def reserved(self, user: str, but: str | None = None) -> tuple[int, int]:
        """(bytes announced, count) of the user's unfinished uploads, but one."""
        ups = [meta for up, meta in pending(self.store.uploads_dir, user) if up.id != but]
        return sum(int(m.get("size") or 0) for m in ups), len(ups)

    def upload(self, owner: str, name: str, upload_id: str) -> Upload:
        up = Upload(self.store.uploads_dir, upload_id)
        meta = up.meta()
        user, _, admin = self.who()
        if (meta["owner"], meta["name"]) != (owner, name) or (meta["user"] != user and not admin):
            raise UserError(404, "There is no such upload.")
        return up


class UploadsHandler(UploadBase):
    async def post(self, owner, name):
        user, _, _ = self.who()
        data = self.body()
        filename, size, digest = data.get("filename"), data.get("size"), data.get("sha256")
        if not isinstance(filename, str) or not filename.strip() or "/" in filename:
            raise UserError(400, "Give the file's name (without folders) as “filename”.")
        if not isinstance(size, int) or size < 0:
            raise UserError(400, "Give the file's size in bytes as “size”.")
        if digest is not None and (not isinstance(digest, str) or not SHA256.match(digest)):
            raise UserError(400, "“sha256” must be the file's SHA-256 as 64 hexadecimal digits.")
        unpack = bool(data.get("unpack"))
        if unpack and archive_kind(filename) is None:
            raise UserError(400, f"{filename} is not an archive this server unpacks (tar, tar.gz, zip).")

        def create():
            with self.db.session() as s:
                datasets.writable(s, owner, name, *self.who())
            # the file counts against the quota from its first byte: an upload may
            # not announce more than the quota leaves, less the uploads under way
            reserved, count = self.reserved(user)
            limit = self.settings["upload_policy"].max_pending
            if count >= limit:
                raise UserError(
                    429,
                    f"You have {count} unfinished uploads; finish or cancel one first (they are "
                    "listed on the Datasets page; abandoned ones go after a day).",
                )
            self.quota_status(user).refuse_beyond(f"Uploading {filename}", size, reserved)
            meta = {
                "owner": owner,
                "name": name,
                "user": user,
                "filename": filename,
                "size": size,
                "sha256": digest,
                "unpack": unpack,
            }
            return Upload.create(self.store.uploads_dir, meta)

        up = await self.blocking(create)
        self.write_json({"id": up.id, "offset": 0, "size": size}, status=201)


@web.stream_request_body
class UploadHandler(UploadBase):
    """PUT streams a chunk to disk as it arrives."""

    _file = None

    _refusal = None

    async def prepare(self):
        # A request refused here is answered only after its body is read (and
        # dropped): refusing before would close the connection mid-upload, and
        # the proxy would answer the client 503 instead of the sentence.
        if self.request.method in ("GET", "DELETE"):
            return
        if self.request.method != "PUT":
            self._refusal = web.HTTPError(
                405, f"{self.request.method} is not an upload operation: use PUT, GET or DELETE."
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
            self._upload = up
            self._file = await self.blocking(up.open_at, start)
            self._written = start
        except web.HTTPError as e:
            self._refusal = e

    async def post(self, *args):
        raise self._refusal or web.HTTPError(405)

    async def data_received(self, chunk: bytes):
        if self._file is None:
            return  # prepare() refused the request; the body is dropped
        self._written += len(chunk)
        if self._written > self._meta["size"]:
            self._close()
            self._refusal = UserError(400, f"The upload is longer than the {self._meta['size']:,} bytes announced.")
            return
        await asyncio.get_running_loop().run_in_executor(None, self._file.write, chunk)

    def on_finish(self):
        self._close()

    def on_connection_close(self):
        # a dropped connection keeps what arrived; the client resumes from GET's offset
        self._close()

    def _close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    async def put(self, owner, name, upload_id):
        if self._refusal is not None:
            raise self._refusal
        await self.blocking(self._file.flush)
        self._close()
        self.write_json({"id": upload_id, "offset": self._written, "size": self._meta["size"]})

    async def get(self, owner, name, upload_id):
        def status():
            up = self.upload(owner, name, upload_id)
            meta = up.meta()
            return {"id": up.id, "offset": up.offset, "size": meta["size"], "filename": meta["filename"]}

        self.write_json(await self.blocking(status))

    async def delete(self, owner, name, upload_id):
        await self.blocking(lambda: self.upload(owner, name, upload_id).discard())
        self.set_status(204)
        self.finish()


class CompleteHandler(UploadBase):
    async def post(self, owner, name, upload_id):
        data = self.body()
        user, _, _ = self.who()

        def complete():
            with self.db.session() as s:
                dataset_id = datasets.writable(s, owner, name, *self.who()).id
            up = self.upload(owner, name, upload_id)
            meta = up.meta()
            if up.offset != meta["size"]:
                raise UserError(
                    409,
                    f"The upload has {up.offset:,} of {meta['size']:,} bytes; send the rest from byte "
                    f"{up.offset:,} first.",
                )
            expected = data.get("sha256") or meta.get("sha256")
            if expected:
                actual = up.sha256()
                if actual != expected.lower():
                    up.discard()
                    raise UserError(
                        400,
                        f"{meta['filename']} arrived damaged (its SHA-256 is {actual}, not {expected}); "
                        "the upload was discarded, please upload it again.",
                    )
            label = meta["filename"]
            # what the quota leaves now bounds the unpacked size and file count
            status = self.quota_status(meta["user"])
            reserved, _ = self.reserved(meta["user"], but=up.id)
            # a plain file's size is known; an archive's expansion is bounded by `room` below
            status.refuse_beyond(f"The version from {label}", 0 if meta["unpack"] else meta["size"], reserved)
            left, files_left = status.room(reserved)
            room = (left if left is not None else 1 << 62, files_left if files_left is not None else 1 << 31)
            try:
                version = dataset_versions.make(
                    self.db,
                    self.store,
                    self.rules,
                    dataset_id,
                    lambda key, check: self.store.dataset_from_files(
                        key,
                        lambda target: place(
                            up, target, meta["filename"], meta["unpack"], label, self.settings["sandbox"], room
                        ),
                        check,
                    ),
                    "upload",
                    label,
                    user,
                )
            finally:
                up.discard()
            quotas.measure(self.db, self.store, meta["user"])
            return version

        self.write_json(await self.blocking(complete), status=201)


def handlers(prefix: str) -> list:
    base = rf"{prefix}api/datasets/([^/]+)/([^/]+)/uploads"
    return [
        (rf"{base}/?", UploadsHandler),
        (rf"{base}/([0-9a-f]+)/?", UploadHandler),
        (rf"{base}/([0-9a-f]+)/complete/?", CompleteHandler),
    ]
