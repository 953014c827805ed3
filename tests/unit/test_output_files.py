"""Outputs' files without a hub: paths in URLs, listings page by page, files opened (never a link, a FIFO or
a device), previews, the streamed archives (tar.gz with stored blocks, zip) read back, and the CLI's
unpacking of hostile archives."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from workspace.cli import outputs as cli_outputs
from workspace.cli.main import CLIError
from workspace.errors import UserError
from workspace.outputs import archives, deflate
from workspace.outputs import files as output_files
from workspace.store import paths

from .test_paths import resolver  # noqa: F401  (a fixture: both ways of resolving beneath a root)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def output(tmp_path) -> Path:
    """A saved home as a student may leave it: files, an empty directory, links to /etc and out of the tree,
    a FIFO, a device node (where this runs as root), a name that is not UTF-8."""
    root = tmp_path / "snap"
    (root / "results/plots").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "results/log.txt").write_text("epoch 1 loss 0.5\n" * 1000)
    (root / "results/weights.bin").write_bytes(os.urandom(3 * archives.CHUNK + 123))
    (root / "results/plots/a.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(100))
    (root / "page.html").write_text("<script>alert(1)</script>")
    os.chmod(root / "results/log.txt", 0o4755)  # setuid: never reaches whoever unpacks
    os.symlink("/etc", root / "etc-link")
    os.symlink("/etc/passwd", root / "results/passwd")
    os.symlink("../../..", root / "results/up")
    os.symlink("log.txt", root / "results/log-link")
    os.mkfifo(root / "pipe")
    if os.geteuid() == 0:
        os.mknod(root / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero: endless, if ever read
    (root / os.fsdecode(b"bad-\xff.txt")).write_bytes(b"odd name")
    return root


def files_of(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): sha(p.read_bytes())
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and stat.S_ISREG(p.lstat().st_mode)
    }


# -- paths and paging --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, rel", [("", b""), (None, b""), ("a/b", b"a/b"), ("./a//b/", b"a/b"), (os.fsdecode(b"x\xff"), b"x\xff")]
)
def test_paths_inside_an_output(raw, rel):
    assert output_files.parse_path(raw) == rel


@pytest.mark.parametrize(
    "raw", ["..", "a/../b", "../../etc", "/etc/passwd", "//etc", "a\0b", "a/%00".replace("%00", "\0")]
)
def test_paths_out_of_an_output_are_400s(raw):
    with pytest.raises(UserError) as e:
        output_files.parse_path(raw)
    assert e.value.status_code == 400 and "output" in e.value.jupyterhub_message


@pytest.mark.parametrize(
    "offset, limit", [("-1", None), ("x", None), ("9" * 5000, None), (None, "0"), (None, "1001"), ("1e3", None)]
)
def test_bad_paging_is_a_400(offset, limit):
    with pytest.raises(UserError) as e:
        output_files.page_args(offset, limit)
    assert e.value.status_code == 400


def test_paging_defaults_and_bounds():
    assert output_files.page_args(None, None) == (0, output_files.DEFAULT_LIMIT)
    assert output_files.page_args("1000000000", "1000") == (10**9, 1000)


# -- listing --------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("resolver")
def test_a_listing_shows_links_as_links_and_never_follows_them(output):
    with paths.Tree(output) as tree:
        top = output_files.listing(tree, b"")
        kinds = {e["name"]: e["type"] for e in top["entries"]}
        assert kinds["etc-link"] == "link" and kinds["pipe"] == "fifo" and kinds["results"] == "dir"
        if os.geteuid() == 0:
            assert kinds["zero"] == "character device"
        # directories first, then by name
        assert [e["name"] for e in top["entries"]][:2] == ["empty", "results"]
        link = next(e for e in top["entries"] if e["name"] == "etc-link")
        assert link["target"] == "/etc" and link["size"] == 4
        bad = next(e for e in top["entries"] if e["name"].startswith("bad-"))
        assert bad["name"] == "bad-\ufffd.txt" and bad["quoted"] == "bad-%FF.txt"
        inner = output_files.listing(tree, b"results")
        assert {e["path"]: e.get("target") for e in inner["entries"] if e["type"] == "link"} == {
            "results/passwd": "/etc/passwd",
            "results/up": "../../..",
            "results/log-link": "log.txt",
        }
        for through in (b"etc-link", b"results/up", b"etc-link/ssl"):
            with pytest.raises(UserError) as e:
                output_files.listing(tree, through)
            assert e.value.status_code == 400, through
        with pytest.raises(UserError) as e:
            output_files.listing(tree, b"nothing")
        assert e.value.status_code == 404
        with pytest.raises(UserError) as e:
            output_files.listing(tree, b"page.html")
        assert e.value.status_code == 400 and "not a directory" in e.value.jupyterhub_message


def test_a_large_directory_is_paged_in_a_stable_order(tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    names = [f"f{i:05d}" for i in range(2500)]
    for n in names:
        (root / n).touch()
    (root / "zdir").mkdir()
    seen = []
    with paths.Tree(root) as tree:
        offset = 0
        while offset is not None:
            page = output_files.listing(tree, b"", offset, 1000)
            assert page["total"] == 2501 and len(page["entries"]) <= 1000
            seen += [e["name"] for e in page["entries"]]
            offset = page["next_offset"]
        assert output_files.listing(tree, b"", 10**9, 10)["entries"] == []
    assert seen == ["zdir", *names]


# -- files ----------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("resolver")
def test_only_regular_files_are_opened(output):
    with paths.Tree(output) as tree:
        fd, st = output_files.open_file(tree, b"results/log.txt")
        try:
            assert os.read(fd, 8) == b"epoch 1 " and st.st_size == 17000
        finally:
            os.close(fd)
        started = time.monotonic()
        for rel, words in (
            (b"etc-link", "is a link to “/etc”"),
            (b"results/passwd", "is a link to “/etc/passwd”"),
            (b"etc-link/passwd", "leads through a link"),
            (b"results/up/etc/passwd", "leads through a link"),
            (b"pipe", "is a fifo"),  # never opened: it would block
            (b"results", "is a dir"),
            *([(b"zero", "is a character device")] if os.geteuid() == 0 else []),
        ):
            with pytest.raises(UserError) as e:
                output_files.open_file(tree, rel)
            assert e.value.status_code == 400 and words in e.value.jupyterhub_message, (rel, e.value)
        assert time.monotonic() - started < 2


def test_content_types_never_let_a_browser_run_a_file():
    assert output_files.content_type(b"page.html", inline=False) == "application/octet-stream"
    assert output_files.content_type(b"x.svg", inline=False) == "application/octet-stream"
    assert output_files.content_type(b"page.html", inline=True) == "text/plain; charset=utf-8"
    assert output_files.content_type(b"a.PNG", inline=True) == "image/png"
    assert output_files.content_type(b"a.svg", inline=True) == "text/plain; charset=utf-8"
    assert output_files.content_type(b"data.csv", inline=False) == "text/csv"
    d = output_files.disposition('résumé "1".txt'.encode(), inline=False)
    assert d.startswith("attachment; filename=\"r_sum_ _1_.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%221%22.txt")


def test_text_previews_and_notebooks_show_text_only():
    assert output_files.text_preview(b"a\x00b", 3)["kind"] == "binary"
    cut = output_files.text_preview("é".encode()[:1], 2)
    assert cut == {"kind": "text", "text": "", "truncated": True}
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": ["# Title\n", "<b>x</b>"]},
            {
                "cell_type": "code",
                "execution_count": 3,
                "source": "print(1)",
                "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": ["1\n"]},
                    {
                        "output_type": "display_data",
                        "data": {"text/html": "<script>alert(1)</script>", "text/plain": "<HTML object>"},
                    },
                    {"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["\x1b[31mBoom\x1b[0m"]},
                ],
            },
            "junk",
        ]
    }
    cells = output_files.notebook(json.dumps(nb).encode())
    assert cells[0] == {"type": "markdown", "source": "# Title\n<b>x</b>", "count": None, "outputs": []}
    outs = cells[1]["outputs"]
    assert [o["kind"] for o in outs] == ["stream", "result", "note", "error"]
    assert outs[1]["text"] == "<HTML object>" and "text/html" in outs[2]["text"] and outs[3]["text"] == "Boom"
    assert "script" not in json.dumps(outs[:2] + outs[3:])
    for bad in (b"{", b"[]", b'{"cells": 3}'):
        with pytest.raises(UserError):
            output_files.notebook(bad)


# -- archives -------------------------------------------------------------------------------------------


class Collect:
    def __init__(self):
        self.chunks: list[bytes] = []

    def __call__(self, chunk: bytes) -> None:
        assert len(chunk) <= 2 * archives.CHUNK + 1024  # bounded: nothing is gathered whole
        self.chunks.append(chunk)

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)


def archive(kind: str, root: Path, rel: bytes = b"", name: str = "top") -> tuple[bytes, archives.Written]:
    out = Collect()
    w = archives.writer(kind, out)
    with paths.Tree(root) as tree:
        got = archives.add_tree(w, tree, rel, name)
    w.close()
    return out.data, got


@pytest.mark.usefixtures("resolver")
def test_a_tar_gz_holds_the_tree_with_links_as_links(output):
    data, got = archive("tar.gz", output)
    assert gzip.decompress(data)  # one ordinary gzip member
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|gz") as tar:  # a stream reader reads it too
        members = {}
        for m in tar:
            members[m.name] = (m, tar.extractfile(m).read() if m.isreg() else None)
    files = {n[len("top/") :]: sha(d) for n, (m, d) in members.items() if m.isreg()}
    expected = files_of(output)
    expected = {k.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape"): v for k, v in expected.items()}
    assert files == expected
    links = {n: m.linkname for n, (m, _) in members.items() if m.issym()}
    assert links == {
        "top/etc-link": "/etc",
        "top/results/passwd": "/etc/passwd",
        "top/results/up": "../../..",
        "top/results/log-link": "log.txt",
    }
    assert "top/pipe" not in members and "top/zero" not in members
    assert members["top/empty"][0].isdir()
    assert members["top/results/log.txt"][0].mode == 0o755  # no setuid
    assert got.files == len(expected) and got.links == 4
    assert any("fifo" in s for s in got.skipped)
    assert b"root:x:0:0" not in gzip.decompress(data)


def test_a_zip_holds_the_files_and_names_what_it_left_out(output):
    data, got = archive("zip", output, b"results", "results")
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = z.namelist()
        assert "results/plots/" in names
        files = {n[len("results/") :]: sha(z.read(n)) for n in names if not n.endswith("/")}
        assert z.getinfo("results/weights.bin").compress_type == zipfile.ZIP_STORED  # random: stored
        assert z.getinfo("results/log.txt").compress_type == zipfile.ZIP_DEFLATED
        assert z.testzip() is None
        comment = z.comment.decode()
    expected = {k[len("results/") :]: v for k, v in files_of(output).items() if k.startswith("results/")}
    assert files == expected
    assert "results/passwd: a link to '/etc/passwd'" in comment and "results/up" in comment
    assert got.links == 3 and got.files == 3


@pytest.mark.usefixtures("resolver")
def test_the_root_a_file_or_a_link_alone(output):
    data, _ = archive("tar.gz", output, b"results/log.txt", "log.txt")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert [m.name for m in tar.getmembers()] == ["log.txt"]
    data, _ = archive("tar.gz", output, b"etc-link", "etc-link")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        (m,) = tar.getmembers()
        assert m.issym() and m.linkname == "/etc"
    with pytest.raises((paths.Escape, NotADirectoryError)):  # never /etc/passwd
        archive("zip", output, b"etc-link/passwd", "x")


def test_gzip_mixes_compressed_and_stored_blocks():
    out = Collect()
    g = deflate.GzipStream(out)
    parts = []
    for i in range(8):
        part = os.urandom(70_000 + i) if i % 2 else b"text %d\n" % i * 10_000
        g.plain(i % 2 == 1)
        g.write(part)
        parts.append(part)
    g.close()
    assert gzip.decompress(out.data) == b"".join(parts)
    assert len(out.data) < sum(map(len, parts))


def test_a_files_start_is_the_trial_and_is_written_once():
    """#34: a tar.gz compresses a file's first PROBE bytes into the stream to decide; text goes on compressed,
    noise is stored from there; every byte is in the stream once."""
    out = Collect()
    g = deflate.GzipStream(out)
    text, noise = b"epoch 1 loss 0.5\n" * 20_000, os.urandom(300_000)
    assert g.probe(text[: deflate.PROBE]) is True
    g.write(text[deflate.PROBE :])
    assert g.probe(noise[: deflate.PROBE]) is False
    g.plain(True)
    g.write(noise[deflate.PROBE :])
    g.close()
    assert gzip.decompress(out.data) == text + noise
    assert len(out.data) < len(noise) + len(text) // 20  # the text compressed, the noise not grown


def test_a_writer_stops_when_nobody_reads(output):
    w = archives.writer("tar.gz", lambda chunk: None)
    calls = []

    def check():
        calls.append(1)
        if len(calls) > 3:
            raise archives.Cancelled()

    with paths.Tree(output) as tree, pytest.raises(archives.Cancelled):
        archives.add_tree(w, tree, b"", "top", check)


# -- the CLI's unpacking ---------------------------------------------------------------------------------


def tar_of(*members) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, kind, extra in members:
            info = tarfile.TarInfo(name)
            data = None
            if kind == "file":
                data = extra or b"x"
                info.size = len(data)
                info.mode = 0o4755
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, extra
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, extra
            elif kind == "chr":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 5
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    buf.seek(0)
    return buf


def test_unpacking_our_own_archive_gives_the_tree_back(output, tmp_path):
    data, _ = archive("tar.gz", output)
    dest = tmp_path / "dest"
    dest.mkdir()
    done = cli_outputs.unpack_tar(io.BytesIO(data), dest)
    assert files_of(dest) == files_of(output)
    assert os.readlink(dest / "results/log-link") == "log.txt"  # inside: kept
    for out in ("etc-link", "results/passwd", "results/up"):
        assert not os.path.lexists(dest / out), out
    assert done.links == 1 and sum("points outside" in s for s in done.skipped) == 3
    assert stat.S_IMODE((dest / "results/log.txt").stat().st_mode) == 0o755


@pytest.mark.parametrize("name", ["top/../../escaped", "/abs/path", "top/a/../../../x"])
def test_unpacking_refuses_names_out_of_the_directory(tmp_path, name):
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(CLIError) as e:
        cli_outputs.unpack_tar(tar_of((name, "file", b"pwned")), dest)
    assert "outside the directory" in str(e.value)
    assert not (tmp_path / "escaped").exists() and not Path("/abs/path").exists()


def test_unpacking_makes_no_link_out_and_writes_nothing_through_one(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    done = cli_outputs.unpack_tar(
        tar_of(
            ("top/", "dir", None),
            ("top/t", "sym", "."),
            ("top/L", "sym", "t/.."),  # the chain: each stays inside by name, L leads out through t
            ("top/u", "sym", "L/.."),
            ("top/a", "sym", "../outside"),
            ("top/a/x", "file", b"through the link"),  # a real directory a is made; the link a is not
            ("top/d", "sym", "sub"),
            ("top/d/e", "sym", "."),
            ("top/zero", "chr", None),
            ("top/pipe", "fifo", None),
            ("top/hard", "hard", "/etc/passwd"),
            ("top/twice", "file", b"1"),
            ("top/twice", "file", b"2"),
        ),
        dest,
    )
    assert os.listdir(outside) == []
    assert (dest / "a/x").read_bytes() == b"through the link" and not (dest / "a").is_symlink()
    assert os.readlink(dest / "t") == "."
    for gone in ("L", "u", "zero", "pipe", "hard", "d/e"):
        assert not os.path.lexists(dest / gone), gone
    reasons = "\n".join(done.skipped)
    assert "L -> t/..: it points through another link" in reasons
    assert "a device or pipe" in reasons and "a hard link" in reasons and "twice" in reasons
    assert (dest / "twice").read_bytes() == b"1"


def test_a_cut_download_is_an_error(output, tmp_path):
    data, _ = archive("tar.gz", output)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(CLIError) as e:
        cli_outputs.unpack_tar(io.BytesIO(data[: len(data) // 2]), dest)
    assert "cut" in str(e.value)
