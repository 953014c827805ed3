"""The unpacker (run in the sandbox) refuses every member that would land outside the dataset.

Here it runs as a plain process in a temporary directory: its logic is what
is tested; tests/integration/test_datasets.py and tests/security/ run it in
its sandbox.
"""

import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import workspace.uploads.unpacker
from workspace.errors import UserError
from workspace.uploads.staging import archive_kind


def unpack(archive, kind, out, label, max_bytes=1 << 40, max_files=1 << 20):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            workspace.uploads.unpacker.__file__,
            kind,
            str(archive),
            str(max_bytes),
            str(max_files),
            label,
        ],
        cwd=out,
        capture_output=True,
        text=True,
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if proc.returncode == 2:
        raise UserError(400, result["error"])
    assert proc.returncode == 0, proc.stderr
    return result


def make_tar(path, members):
    with tarfile.open(path, "w") as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(value)
                tar.addfile(info, io.BytesIO(value))
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, value
                tar.addfile(info)
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, value
                tar.addfile(info)
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
                tar.addfile(info)
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
    return path


def test_kinds():
    assert archive_kind("a.tar.gz") == "tar" and archive_kind("A.ZIP") == "zip" and archive_kind("a.bin") is None


def test_a_clean_tar_unpacks(tmp_path):
    archive = make_tar(tmp_path / "ok.tar", [("d/a", "file", b"a"), ("d/link", "sym", "a"), ("b", "hard", "d/a")])
    unpack(archive, "tar", tmp_path / "out", "ok.tar")
    assert (tmp_path / "out/d/link").read_text() == "a" and (tmp_path / "out/b").read_text() == "a"


def test_file_count_and_a_zip_lying_about_sizes_are_bounded(tmp_path):
    archive = make_tar(tmp_path / "many.tar", [(f"f{i}", "file", b"") for i in range(20)])
    with pytest.raises(UserError) as err:
        unpack(archive, "tar", tmp_path / "out", "many.tar", max_files=10)
    assert "more than 10 entries" in err.value.jupyterhub_message
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("zeros", b"\0" * 5_000_000)
    # the header's size is believed first, the real bytes counted as written
    with pytest.raises(UserError) as err:
        unpack(tmp_path / "bomb.zip", "zip", tmp_path / "out2", "bomb.zip", max_bytes=1_000_000)
    assert "more than 1,000,000 bytes" in err.value.jupyterhub_message


@pytest.mark.parametrize(
    "members, words",
    [
        ([("../x", "file", b"x")], "would be written outside"),
        ([("/abs", "file", b"x")], "would be written outside"),
        ([("d/l", "sym", "../../x")], "points outside"),
        ([("l", "sym", "/etc/passwd")], "points outside"),
        ([("d/h", "hard", "../x")], "points outside"),
        ([("d/h", "hard", "nothing-before")], "earlier file"),
        ([("p", "fifo", None)], "device or pipe"),
        # CVE-2025-4517's shape: links that stay inside, then a member written through them
        ([("a", "sym", "."), ("a/a/a/x", "file", b"x")], "through a link"),
        ([("d", "dir", None), ("d/l", "sym", ".."), ("d/l/first", "file", b"x")], "through a link"),
        ([("first", "file", b"2")], "twice"),
        ([("big", "file", b"x" * 2000)], "more than 1,000 bytes"),
    ],
)
def test_escaping_tar_members_are_refused_before_anything_is_written(tmp_path, members, words):
    archive = make_tar(tmp_path / "bad.tar", [("first", "file", b"1"), *members])
    with pytest.raises(UserError) as err:
        unpack(archive, "tar", tmp_path / "out", "bad.tar", max_bytes=1000)
    assert err.value.status_code == 400 and words in err.value.jupyterhub_message
    assert list((tmp_path / "out").iterdir()) == []


def test_escaping_zip_members_are_refused(tmp_path):
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as z:
        z.writestr("ok.txt", "x")
        z.writestr("../evil.txt", "x")
    with pytest.raises(UserError):
        unpack(tmp_path / "bad.zip", "zip", tmp_path / "out", "bad.zip")
    assert not (tmp_path / "evil.txt").exists()
