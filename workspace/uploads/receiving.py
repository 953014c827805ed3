"""The uploads this process is receiving (#34): one chunk (PUT) at a time per upload, and the SHA-256 of
each upload's bytes so far, kept as they are written so that completing a 2 GB upload does not read it all
again to check its checksum.

A running hash is kept only while it is known to cover exactly the bytes on disk: a chunk that ends
normally leaves it for the next chunk, which must start where it ended; a chunk cut off (its last bytes
may be half written) or one that failed to write forgets it, and completing that upload reads the file
again (`Upload.sha256`), as after a restart of the service, which keeps nothing of this.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from workspace.errors import UserError

MAX_KEPT = 1000  # running hashes kept (a few hundred bytes each); the oldest is forgotten first


class Receiving:
    def __init__(self, max_kept: int = MAX_KEPT):
        self.max_kept = max_kept
        self.busy: set[str] = set()
        self.running: OrderedDict[str, tuple[int, object]] = OrderedDict()  # upload id -> (offset, its hash)

    def begin(self, upload_id: str, offset: int):
        """A chunk from `offset` on begins; the hash to go on with (None: none is known to fit)."""
        if upload_id in self.busy:
            raise UserError(
                409,
                "Another chunk of this upload is being received; wait for it to end, then resume from the "
                "offset the upload's status tells.",
            )
        self.busy.add(upload_id)
        # (not named `kept`: Babel takes that name for i18n.kept and would extract the docstrings below)
        known = self.running.pop(upload_id, None)
        if offset == 0:
            return hashlib.sha256()
        return known[1] if known is not None and known[0] == offset else None

    def end(self, upload_id: str, offset: int, digest) -> None:
        """The chunk ended with `offset` bytes on disk, all of them in `digest` (None: not known to be)."""
        self.busy.discard(upload_id)
        if digest is None:
            return
        self.running[upload_id] = (offset, digest)
        while len(self.running) > self.max_kept:
            self.running.popitem(last=False)

    def sha256(self, upload_id: str, size: int) -> str | None:
        """The SHA-256 of an upload's `size` bytes, if its running hash covers exactly those; else None."""
        known = self.running.get(upload_id)
        return known[1].hexdigest() if known is not None and known[0] == size else None

    def forget(self, upload_id: str) -> None:
        self.running.pop(upload_id, None)
