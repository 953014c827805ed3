"""The uploads being received (workspace/uploads/receiving.py, #34): the running SHA-256 is used only
when it covers exactly the bytes on disk, and one chunk at a time per upload."""

from __future__ import annotations

import hashlib

import pytest

from workspace.errors import UserError
from workspace.uploads.receiving import Receiving


def test_a_hash_goes_on_across_chunks_that_end_normally():
    r = Receiving()
    h = r.begin("u1", 0)
    h.update(b"abc")
    r.end("u1", 3, h)
    h = r.begin("u1", 3)
    h.update(b"def")
    r.end("u1", 6, h)
    assert r.sha256("u1", 6) == hashlib.sha256(b"abcdef").hexdigest()
    assert r.sha256("u1", 7) is None  # not the size asked: the file is read again


def test_a_chunk_cut_off_or_resumed_elsewhere_leaves_no_hash():
    r = Receiving()
    h = r.begin("u1", 0)
    h.update(b"abc")
    r.end("u1", 3, None)  # cut off: its last bytes may be half written
    assert r.begin("u1", 3) is None and r.sha256("u1", 3) is None
    r.end("u1", 6, None)
    h = r.begin("u2", 0)
    r.end("u2", 10, h)
    assert r.begin("u2", 7) is None  # a chunk that does not start where the hash ends


def test_one_chunk_at_a_time_per_upload():
    r = Receiving()
    r.begin("u1", 0)
    with pytest.raises(UserError) as refused:
        r.begin("u1", 0)
    assert refused.value.status_code == 409
    r.begin("u2", 0)  # another upload is another matter
    r.end("u1", 0, None)
    r.begin("u1", 0)


def test_what_is_kept_is_bounded():
    r = Receiving(max_kept=3)
    for i in range(10):
        r.end(f"u{i}", 0, r.begin(f"u{i}", 0))
    assert list(r.running) == ["u7", "u8", "u9"]
    r.forget("u8")
    assert list(r.running) == ["u7", "u9"]
