"""A tar.gz's gzip stream: pieces compressed on several threads at once, laid end to end in order (#34)."""

from __future__ import annotations

import gzip
import os
import random
import subprocess
import threading
import zlib

from workspace.outputs import deflate


def csv_text(lines: int) -> bytes:
    rng = random.Random(1)
    return "".join(f"{i},{rng.random():.6f},{rng.gauss(0, 1):.6f},epoch {i % 97}\n" for i in range(lines)).encode()


def test_pieces_compressed_at_once_read_as_one_stream_by_every_reader(monkeypatch):
    text, noise = csv_text(200_000), os.urandom(3 * deflate.SEGMENT + 7)
    meet = threading.Barrier(2, timeout=10)  # the first two pieces wait for each other: both at once, or broken
    started = []
    real = deflate.piece

    def piece(*parts, level):
        started.append(threading.current_thread().name)
        if len(started) <= 2:
            meet.wait()
        return real(*parts, level=level)

    monkeypatch.setattr(deflate, "piece", piece)
    out = bytearray()
    g = deflate.GzipStream(out.extend)
    g.write(b"header" * 100)
    g.write(text)  # several SEGMENTs: pieces in the pool
    assert g.probe(noise[: deflate.PROBE]) is False
    g.plain(True)
    g.write(noise[deflate.PROBE :])
    g.plain(False)
    g.write(memoryview(bytearray(text[:5000])))  # a buffer that may change: copied, not held
    g.close()
    whole = b"header" * 100 + text + noise + text[:5000]
    assert gzip.decompress(bytes(out)) == whole
    # another reader than Python's: gzip(1)
    assert subprocess.run(["gzip", "-dc"], input=bytes(out), capture_output=True, check=True).stdout == whole
    assert len(started) >= 4 and all(name.startswith("deflate") for name in started[:2]), started
    assert len(out) < len(noise) + len(text) // 2  # the text compressed, the noise stored


def test_one_stream_holds_at_most_AHEAD_pieces_whatever_the_pool_s_backlog(monkeypatch):
    gate = threading.Event()
    most = []
    real = deflate.piece

    def piece(*parts, level):
        gate.wait(10)  # the pool stalls: the writer must wait rather than queue everything
        return real(*parts, level=level)

    monkeypatch.setattr(deflate, "piece", piece)
    made = []
    g = deflate.GzipStream(lambda chunk: made and most.append(len(made[0].ahead)))
    made.append(g)
    text = csv_text(40_000)[: deflate.SEGMENT]
    assert len(text) == deflate.SEGMENT
    writer = threading.Thread(target=lambda: [g.write(text) for _ in range(3 * deflate.AHEAD)])
    writer.start()
    writer.join(1)
    assert writer.is_alive() and len(g.ahead) == deflate.AHEAD  # waiting on the oldest, taken out
    gate.set()
    writer.join(30)
    g.close()
    assert max(most) <= deflate.AHEAD


def test_a_thread_s_compressor_starts_each_piece_with_no_history():
    """A thread reuses its compressor (made once: ISA-L's is costly to make); the full flush that ends a
    piece resets its history, so a piece decompresses alone even when it repeats the piece before."""
    text = csv_text(5_000)
    first = deflate.piece(text)
    again = deflate.piece(text, text[:100])
    assert len(again) > len(first)  # (were the history kept, `again` would be a few back-references)
    d = zlib.decompressobj(-15)
    assert d.decompress(again + deflate._FINAL) == text + text[:100] and d.eof


def test_files_read_whole_are_compressed_or_stored_as_their_start_says():
    out = bytearray()
    g = deflate.GzipStream(out.extend)
    text, noise = csv_text(10_000), os.urandom(500_000)
    g.whole(b"H" * 512, text, b"\0" * 7)
    g.whole(b"N" * 512, noise, b"")
    g.close()
    assert gzip.decompress(bytes(out)) == b"H" * 512 + text + b"\0" * 7 + b"N" * 512 + noise
    assert len(noise) < len(out) < len(noise) + len(text) // 2
