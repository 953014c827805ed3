"""Dataset references, names, access and the rules a version must pass."""

import os

import pytest

from workspace.datasets import Dataset, DatasetRules, DatasetShare, Ref, check_slug, parse_refs
from workspace.errors import UserError


def test_refs():
    assert parse_refs(None) == []
    assert parse_refs(["ada/mnist", "course/imagenet:3"]) == [Ref("ada", "mnist", None), Ref("course", "imagenet", 3)]
    assert parse_refs("ada/mnist, bob/x:2") == [Ref("ada", "mnist", None), Ref("bob", "x", 2)]


@pytest.mark.parametrize(
    "value, words",
    [
        (["mnist"], "is not a dataset reference"),
        (["a/b:0"], "numbered from 1"),
        (["a/b", "a/b:2"], "listed twice"),
        ([f"a/d{i}" for i in range(6)], "At most 5 datasets"),
        ([1, 2], "must be a list of references"),
        ({"a": "b"}, "must be a list of references"),
    ],
)
def test_bad_refs_are_400s_with_sentences(value, words):
    with pytest.raises(UserError) as err:
        parse_refs(value)
    assert err.value.status_code == 400 and words in err.value.jupyterhub_message


@pytest.mark.parametrize("name", ["mnist", "cifar-10", "a", "x.y_z"])
def test_slugs(name):
    assert check_slug(name) == name


@pytest.mark.parametrize("name", ["", "Mnist", "-a", "a b", "a/b", "../x", "x" * 65, None])
def test_bad_slugs(name):
    with pytest.raises(UserError):
        check_slug(name)


def test_access():
    ds = Dataset(owner="prof", name="data", visibility="shared")
    ds.shares = [DatasetShare(kind="user", principal="ada"), DatasetShare(kind="group", principal="cs101")]
    assert ds.readable_by("prof", set())
    assert ds.readable_by("ada", set())
    assert ds.readable_by("bob", {"cs101"})
    assert not ds.readable_by("eve", {"other"})
    assert ds.readable_by("root", set(), admin=True)
    assert Dataset(owner="x", name="y", visibility="public").readable_by("anyone", set())


def test_tree_rules(tmp_path):
    rules = DatasetRules(small_files_min_total=10_000, small_files_min_average=1_000)
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok/a.bin").write_bytes(b"x" * 20_000)
    os.symlink("a.bin", tmp_path / "ok/link")
    assert rules.check_tree(tmp_path / "ok", "ok") == (20_000, 1)

    small = tmp_path / "small"
    small.mkdir()
    for i in range(50):
        with open(small / f"f{i}", "wb") as f:
            f.truncate(300)  # sparse is fine: the rule is about sizes, not blocks
    with pytest.raises(UserError) as err:
        rules.check_tree(small, "small")
    assert "pack the small files into a few large ones (HDF5, LMDB, TFRecord, or tar" in err.value.jupyterhub_message
    rules.small_files_rule = False
    assert rules.check_tree(small, "small")[1] == 50

    bad = tmp_path / "bad"
    (bad / "sub").mkdir(parents=True)
    os.symlink("/etc/passwd", bad / "abs")
    os.symlink("../../outside", bad / "sub/up")
    os.symlink("../inside-is-fine", bad / "sub/ok")
    os.mkfifo(bad / "pipe")
    with pytest.raises(UserError) as err:
        rules.check_tree(bad, "bad")
    msg = err.value.jupyterhub_message
    assert "abs (a link pointing outside)" in msg and "sub/up (a link pointing outside)" in msg
    assert "pipe (a device, pipe or socket)" in msg and "sub/ok" not in msg
