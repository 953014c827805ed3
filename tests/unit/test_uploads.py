"""Unpacking archives refuses every member that would land outside the dataset."""

import io
import tarfile
import zipfile

import pytest

from workspace.errors import UserError
from workspace.uploads import archive_kind, unpack


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
    return path


def test_kinds():
    assert archive_kind("a.tar.gz") == "tar" and archive_kind("A.ZIP") == "zip" and archive_kind("a.bin") is None


def test_a_clean_tar_unpacks(tmp_path):
    archive = make_tar(tmp_path / "ok.tar", [("d/a", "file", b"a"), ("d/link", "sym", "a"), ("b", "hard", "d/a")])
    unpack(archive, "tar", tmp_path / "out", "ok.tar")
    assert (tmp_path / "out/d/link").read_text() == "a" and (tmp_path / "out/b").read_text() == "a"


@pytest.mark.parametrize(
    "members, words",
    [
        ([("../x", "file", b"x")], "would be written outside"),
        ([("/abs", "file", b"x")], "would be written outside"),
        ([("d/l", "sym", "../../x")], "points outside"),
        ([("l", "sym", "/etc/passwd")], "points outside"),
        ([("d/h", "hard", "../x")], "points outside"),
        ([("p", "fifo", None)], "device or pipe"),
    ],
)
def test_escaping_tar_members_are_refused_before_anything_is_written(tmp_path, members, words):
    archive = make_tar(tmp_path / "bad.tar", [("first", "file", b"1"), *members])
    with pytest.raises(UserError) as err:
        unpack(archive, "tar", tmp_path / "out", "bad.tar")
    assert err.value.status_code == 400 and words in err.value.jupyterhub_message
    assert list((tmp_path / "out").iterdir()) == []


def test_escaping_zip_members_are_refused(tmp_path):
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as z:
        z.writestr("ok.txt", "x")
        z.writestr("../evil.txt", "x")
    with pytest.raises(UserError):
        unpack(tmp_path / "bad.zip", "zip", tmp_path / "out", "bad.zip")
    assert not (tmp_path / "evil.txt").exists()
